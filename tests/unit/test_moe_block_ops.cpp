// One GPT block's forward and backward through lib/moe/ops (lib/moe/dense_block.hpp)
// in float on the host, the chain a GPU runs with Device::Cuda, against the same chain in float64:
// loss, every activation and every parameter gradient, at fp32 and at bf16 tolerances. The CUDA
// run of the same chain is tests/cuda/test_moe_block_cuda.cpp. The chain's block is the one
// GptMoe runs (lib/moe/models/gpt_block.hpp); its buffers are DeviceArrays, checked last.
#include "tests/unit/test_moe_block_ops.hpp"

#include <catch2/catch.hpp>

#include "core/device_array.hpp"
#include "lib/moe/ops.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;

TEST_CASE("a GPT block's float chain on the host equals the float64 chain", "[moe][ops][block]") {
  const auto inputs = moe::random_dense_block_inputs(moe::DenseBlockShape{}, 7);
  const auto reference = moe::run_dense_block<double>(inputs, Device::Host, moe::Precision::Fp32);
  const auto got = moe::run_dense_block<float>(inputs, Device::Host, moe::Precision::Fp32);
  // The chain is not trivial: a loss near log(vocab) but not at it, softmaxes not uniform.
  CHECK(reference.loss > 1.0);
  CHECK(std::abs(reference.loss - std::log(67.0)) > 0.05);
  test::require_same_run(got, reference, 1e-4, 1e-4);
}

TEST_CASE("a GPT block's bf16 chain on the host equals the float64 chain on bf16-rounded operands",
          "[moe][ops][block]") {
  const auto inputs = moe::random_dense_block_inputs(moe::DenseBlockShape{}, 8);
  const auto reference = moe::run_dense_block<double>(inputs, Device::Host, moe::Precision::Bf16);
  const auto got = moe::run_dense_block<float>(inputs, Device::Host, moe::Precision::Bf16);
  test::require_same_run(got, reference, 2e-2, 2e-2);
}

TEST_CASE("the float64 references refuse device pointers", "[moe][ops][block]") {
  std::vector<double> x(8), y(8);
  try {
    moe::add_inplace<double>(x.size(), x.data(), y.data(), Device::Cuda);
    FAIL("no error");
  } catch (const skew::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("add_inplace") != std::string::npos);
    CHECK(message.find("float64 reference runs on the host only") != std::string::npos);
    CHECK(e.where().find("ops_internal.hpp") != std::string::npos);  // where the check stands, for developers
  }
}

TEST_CASE("a DeviceArray keeps its allocation at a steady size and copies parts", "[moe][block][buffer]") {
  DeviceArray<float> b(Device::Host);
  b.resize(7);
  for (float x : b) CHECK(x == 0.0f);  // a fresh allocation is zero-filled
  const std::vector<float> values = {1.5f, -2.25f, 3.0f};
  b.upload(values.data(), values.size(), 2);
  const float* before = b.data();
  b.resize(7);  // the same size: the same storage and values
  CHECK(b.data() == before);
  CHECK(b.host_copy() == std::vector<float>{0, 0, 1.5f, -2.25f, 3.0f, 0, 0});
  std::vector<float> part(2);
  b.download(part.data(), 2, 3);
  CHECK(part == std::vector<float>{-2.25f, 3.0f});
  DeviceArray<float> copy(Device::Host);
  copy.assign(b);
  b[2] = 9.0f;  // the copy is its own storage
  CHECK(copy[2] == 1.5f);
  b.zero();
  CHECK(b.host_copy() == std::vector<float>(7, 0.0f));
  b.resize(4);
  CHECK(b.size() == 4);
  CHECK_THROWS_WITH(b.upload(values.data(), values.size(), 2), Catch::Contains("copy of [2, 5) out of a buffer of 4"));
  if (cuda_device_count() == 0) {
    DeviceArray<float> gpu(Device::Cuda);
    CHECK_THROWS_WITH(gpu.resize(3), Catch::Contains("CUDA"));
  }
}
