# CUDA twins of the MoE kernels against the CPU versions (skip without a GPU).
skew_cuda_test(skew_moe_cuda_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_cuda.cpp LIBS skew_moe)
