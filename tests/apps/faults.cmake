# Issue 17: faults injected into moe_train's checkpointing (scripts/fault_check.py): ranks killed
# at random moments and resumed until done, a byte flipped in the newest shard, a full disk under
# the checkpoint directory (skipped, saying so, without root). Each must end bit-identical to a
# straight run: nothing lost.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND AND TARGET moe_train)
  add_test(NAME fault_check COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/fault_check.py
                                    ${CMAKE_BINARY_DIR} --kills 8 --seed 3)
  set_tests_properties(fault_check PROPERTIES TIMEOUT 600 PROCESSORS 2 LABELS faults)
endif()
# Issue 38: the same faults made deterministic, for each app (scripts/resume_faults.py): a kill -9
# halfway through a checkpoint's shard (SKEW_TEST_KILL_IN_CHECKPOINT) and a flipped byte in the
# newest shard, each resumed to a final model byte-identical to a straight run's; the flipped
# step is skipped with a warning naming its file (core/checkpoint_resume.hpp).
if(Python3_FOUND)
  foreach(case moe:moe_train wide:wide_train preduce_sim:preduce_train preduce_np2:preduce_train)
    string(REPLACE ":" ";" parts ${case})
    list(GET parts 0 app_case)
    list(GET parts 1 app_target)
    if(TARGET ${app_target})
      add_test(NAME resume_faults_${app_case}
               COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/resume_faults.py ${CMAKE_BINARY_DIR}
                       ${app_case})
      set_tests_properties(resume_faults_${app_case} PROPERTIES TIMEOUT 300 PROCESSORS 2 LABELS faults)
    endif()
  endforeach()
endif()
