// Empty inputs reach the CUDA kernels without a zero-block launch (which fails with
// cudaErrorInvalidConfiguration) and leave their outputs as the CPU twins do; sizes the kernels
// cannot index are refused with a message instead of being narrowed to int.
#include <catch2/catch.hpp>

#include "core/cuda_check.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_gate.hpp"
#include "tests/cuda/tensor_transfer.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
namespace km = skew::kernels::moe;
using skew::test::on_gpu;
using skew::test::on_host;

TEST_CASE("CUDA MoE kernels on empty inputs match the CPU twins and launch nothing", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int bins = 5;
  const std::vector<std::int32_t> keys{3};  // an address; the calls pass n = 0
  std::vector<std::int64_t> host_counts(bins, 7);
  km::histogram(Device::Host, keys.data(), 0, bins, host_counts.data());
  Tensor dkeys = on_gpu(keys), dcounts = on_gpu(std::vector<std::int64_t>(bins, 7));
  km::histogram(Device::Cuda, dkeys.data<std::int32_t>(), 0, bins, dcounts.data<std::int64_t>());
  CHECK(on_host<std::int64_t>(dcounts) == host_counts);
  CHECK(host_counts == std::vector<std::int64_t>(bins, 0));

  Tensor untouched = on_gpu(std::vector<std::int64_t>{-9});
  km::stable_positions(Device::Cuda, dkeys.data<std::int32_t>(), 0, bins, dcounts.data<std::int64_t>(),
                       untouched.data<std::int64_t>());
  km::exclusive_scan(Device::Cuda, dcounts.data<std::int64_t>(), 0, untouched.data<std::int64_t>());
  Tensor rows = on_gpu(std::vector<float>{1.f, 2.f}), out = on_gpu(std::vector<float>{-1.f, -1.f});
  km::scatter_rows(Device::Cuda, rows.data<float>(), untouched.data<std::int64_t>(), 0, 2, out.data<float>());
  Tensor expert = on_gpu(std::vector<std::int32_t>{-1}), lse = on_gpu(std::vector<float>{-1.f});
  km::softmax_topk(Device::Cuda, 0, 4, 1, rows.data<float>(), out.data<float>(), lse.data<float>(),
                   expert.data<std::int32_t>(), out.data<float>());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(on_host<std::int64_t>(untouched) == std::vector<std::int64_t>{-9});
  CHECK(on_host<float>(out) == std::vector<float>{-1.f, -1.f});
  CHECK(on_host<std::int32_t>(expert) == std::vector<std::int32_t>{-1});

  // Keys with no bins: both twins refuse.
  CHECK_THROWS(km::histogram(Device::Host, keys.data(), 1, 0, host_counts.data()));
  CHECK_THROWS_WITH(km::histogram(Device::Cuda, dkeys.data<std::int32_t>(), 1, 0, dcounts.data<std::int64_t>()),
                    Catch::Contains("1 keys into 0 bins"));
  CHECK_THROWS_WITH(
      km::scatter_rows(Device::Cuda, rows.data<float>(), untouched.data<std::int64_t>(), -1, 2, out.data<float>()),
      Catch::Contains("-1 rows"));
}

TEST_CASE("CUDA bf16 GEMM with an empty side leaves C and the device error state clean", "[gemm][cuda]") {
  SKEW_REQUIRE_GPU();
  // m = 0: no rows of A or C; the operand conversion of A launches nothing.
  kernels::GemmShape shape;
  shape.m = 0, shape.n = 3, shape.k = 2, shape.lda = 2, shape.ldb = 3, shape.ldc = 3;
  Tensor a = on_gpu(std::vector<float>{1.f, 2.f}), b = on_gpu(std::vector<float>(6, 0.5f));
  Tensor c = on_gpu(std::vector<float>(3, -4.f));
  kernels::gemm_bf16(Device::Cuda, shape, 1.f, a.data<float>(), b.data<float>(), 0.f, c.data<float>());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(on_host<float>(c) == std::vector<float>(3, -4.f));
  // The same shape with one row equals the float64 reference (bf16 of 1, 2 and 0.5 is exact).
  shape.m = 1;
  kernels::gemm_bf16(Device::Cuda, shape, 1.f, a.data<float>(), b.data<float>(), 0.f, c.data<float>());
  std::vector<double> want(3);
  const std::vector<float> ha{1.f, 2.f}, hb(6, 0.5f);
  kernels::gemm_reference(shape, 1.0, ha.data(), hb.data(), 0.0, want.data());
  const auto got = on_host<float>(c);
  for (std::size_t j = 0; j < 3; ++j) CHECK(got[j] == Approx(want[j]));
}
