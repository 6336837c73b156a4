skew_mpi_test(skew_wide_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_mpi.cpp LIBS skew_wide NP 1 2)
