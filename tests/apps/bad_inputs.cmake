# Issue 17: the bad-input catalogue (scripts/bad_inputs.py: a few hundred malformed config values,
# command lines, data files, damaged checkpoints and unwritable outputs) against the four training
# apps. The test fails on any case that does not end as a demanding user expects (a hang, a
# crash, a vague error, a silently accepted value).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  # The runner's verdicts (clear error, vague, crash, hang, accepted, ...) on stand-in shell scripts.
  add_test(NAME bad_inputs_self_test COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/bad_inputs.py --self-test)
  set_tests_properties(bad_inputs_self_test PROPERTIES TIMEOUT 120)
endif()
if(Python3_FOUND AND TARGET moe_train AND TARGET wide_train AND TARGET preduce_train AND TARGET placement_sim)
  add_test(NAME bad_inputs_catalogue
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/bad_inputs.py ${CMAKE_BINARY_DIR} --jobs 2
                   --mpirun ${MPIEXEC_EXECUTABLE})
  # 496 runs of one to three seconds each (mostly MPI start-up), two at a time: 3.3 minutes on two
  # cores; each case that hangs adds its 15 s timeout.
  set_tests_properties(bad_inputs_catalogue PROPERTIES TIMEOUT 1500 PROCESSORS 2 LABELS bad_inputs)
endif()
