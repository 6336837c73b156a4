skew_mpi_test(skew_preduce_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_preduce_mpi.cpp LIBS skew_preduce NP 2 4)
skew_mpi_test(skew_preduce_resume_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_preduce_resume.cpp LIBS skew_preduce NP 2 3)
