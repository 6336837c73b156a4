skew_cuda_test(skew_wide_cuda_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_cuda.cpp LIBS skew_wide)
# Data-parallel CUDA training under mpirun: skips unless a GPU is visible (ranks may share it).
if(SKEW_HAVE_CUDA)
  skew_mpi_test(skew_wide_cuda_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_cuda_mpi.cpp LIBS skew_wide NP 2)
  set_tests_properties(skew_wide_cuda_mpi_test_np2 PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: ")
endif()
