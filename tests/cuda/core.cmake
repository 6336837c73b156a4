# Foundation tests on the GPU (CUDA builds only; every case skips when no GPU is visible).
skew_cuda_test(skew_cuda_core_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_core.cpp ${CMAKE_CURRENT_LIST_DIR}/test_cuda_rng.cu
  LIBS skew_core skew_kernels)

# Empty inputs to the MoE and GEMM kernels: no zero-block launches, outputs as the CPU twins'.
skew_cuda_test(skew_cuda_empty_launch_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_empty_launches.cpp
  LIBS skew_kernels_moe)

# NCCL process group under mpirun; a case skips unless every rank can have its own GPU.
if(SKEW_HAVE_CUDA)
  skew_mpi_test(skew_cuda_nccl_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_nccl.cpp
    LIBS skew_comm
    NP 1 2)
  set_tests_properties(skew_cuda_nccl_test_np1 skew_cuda_nccl_test_np2 PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: ")
endif()

# The communication layer on GPU buffers under mpirun: MPI staging of device tensors (ranks may
# share a GPU), the hybrid MPI+NCCL group (a GPU per rank), placement moves of device tensors and
# the cost model's device timing, each against host buffers. np 1 covers the hybrid group on one
# GPU (collectives, routing, a self send/recv); np 2 the moves between ranks.
if(SKEW_HAVE_CUDA)
  skew_mpi_test(skew_cuda_comm_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_comm.cpp
    LIBS skew_placement skew_comm
    NP 1 2)
  set_tests_properties(skew_cuda_comm_test_np1 skew_cuda_comm_test_np2 PROPERTIES
    SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA device")
endif()
