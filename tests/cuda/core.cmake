# Foundation tests on the GPU (CUDA builds only; every case skips when no GPU is visible).
skew_cuda_test(skew_cuda_core_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_core.cpp ${CMAKE_CURRENT_LIST_DIR}/test_cuda_rng.cu
  LIBS skew_core skew_kernels)

# NCCL process group under mpirun; a case skips unless every rank can have its own GPU.
if(SKEW_HAVE_CUDA)
  skew_mpi_test(skew_cuda_nccl_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_nccl.cpp
    LIBS skew_comm
    NP 1 2)
  set_tests_properties(skew_cuda_nccl_test_np1 skew_cuda_nccl_test_np2 PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: ")
endif()
