// One GPT block's forward and backward through lib/moe/ops with Device::Cuda buffers (the CUDA
// kernels, cuBLAS and its strided-batched GEMMs) against the same chain with Device::Host buffers
// (the CPU twins and OpenBLAS) on the same random weights, odd shapes (d 96, 4 heads, seq 33,
// batch 3, vocab 67, d_ff 160): loss, every activation and every parameter gradient, at fp32
// tolerances and, in mixed precision, at bf16 ones. The chain is lib/moe/dense_block.hpp;
// its host run is checked against float64 in tests/unit/test_moe_block_ops.cpp.
#include <catch2/catch.hpp>

#include "tests/cuda_skip.hpp"
#include "tests/unit/test_moe_block_ops.hpp"

using namespace skew;

TEST_CASE("CUDA GPT block forward and backward equal the CPU chain (fp32)", "[moe][cuda][block]") {
  SKEW_REQUIRE_GPU();
  const auto inputs = moe::random_dense_block_inputs(moe::DenseBlockShape{}, 11);
  const auto host = moe::run_dense_block<float>(inputs, Device::Host, moe::Precision::Fp32);
  const auto gpu = moe::run_dense_block<float>(inputs, Device::Cuda, moe::Precision::Fp32);
  test::require_same_run(gpu, host, 1e-4, 1e-4);
}

TEST_CASE("CUDA GPT block forward and backward equal the CPU chain (bf16 GEMM inputs)", "[moe][cuda][block]") {
  SKEW_REQUIRE_GPU();
  const auto inputs = moe::random_dense_block_inputs(moe::DenseBlockShape{}, 12);
  const auto host = moe::run_dense_block<float>(inputs, Device::Host, moe::Precision::Bf16);
  const auto gpu = moe::run_dense_block<float>(inputs, Device::Cuda, moe::Precision::Bf16);
  test::require_same_run(gpu, host, 2e-2, 2e-2);
}
