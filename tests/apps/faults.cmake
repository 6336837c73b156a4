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
