# CUDA twins of the MoE kernels against the CPU versions (skip without a GPU): dispatch, gate,
# elementwise and expert kernels; the row-wise ones (layernorm, embedding, causal softmax,
# cross-entropy, sum of squares); one GPT block's forward and backward through lib/moe/ops on the
# GPU against the same chain on the host.
skew_cuda_test(skew_moe_cuda_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_rowwise_cuda.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_block_cuda.cpp
  LIBS skew_moe)
