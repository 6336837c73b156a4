skew_unit_test(skew_preduce_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_preduce_groups.cpp ${CMAKE_CURRENT_LIST_DIR}/test_preduce_model.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_preduce_options.cpp ${CMAKE_CURRENT_LIST_DIR}/test_preduce_resume_sim.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_preduce_hetero.cpp ${CMAKE_CURRENT_LIST_DIR}/test_preduce_isolation.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_preduce_even_sim.cpp ${CMAKE_CURRENT_LIST_DIR}/test_preduce_memory.cpp
  LIBS skew_preduce skew_preduce_options)
