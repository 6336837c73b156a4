# CUDA twins of the MoE kernels against the CPU versions (skip without a GPU): dispatch, gate,
# elementwise and expert kernels; the row-wise ones (layernorm, embedding, causal softmax,
# cross-entropy, sum of squares); one GPT block's forward and backward through lib/moe/ops on the
# GPU against the same chain on the host; the MoE layer's routing and gate kernels; Swin's data
# movement (window partition and shift, mask, relative position bias, patches, merging).
skew_cuda_test(skew_moe_cuda_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_rowwise_cuda.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_block_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_route_cuda.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_swin_cuda.cpp
  LIBS skew_moe skew_app_options)
# The MoE layer on the GPU against the host layer at one rank (the layer needs a process group,
# so it runs under mpirun -np 1); skips without a GPU.
if(SKEW_HAVE_CUDA)
  skew_mpi_test(skew_moe_layer_cuda_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_layer_cuda.cpp
    LIBS skew_moe skew_app_options
    NP 1)
  set_tests_properties(skew_moe_layer_cuda_test_np1 PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: ")
  # moe_train's GPT network on the GPU (train.device=cuda) against the host, at 2 ranks: one
  # forward + backward, 20 iterations under every policy, checkpoints (skip without a GPU).
  skew_mpi_test(skew_moe_train_cuda_mpi_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_train_cuda_mpi.cpp
                LIBS skew_moe skew_app_options NP 2)
  set_tests_properties(skew_moe_train_cuda_mpi_test_np2 PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: ")
endif()
