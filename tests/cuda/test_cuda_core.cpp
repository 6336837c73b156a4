// Tensor host <-> device copies and cuBLAS GEMM (fp32, and bf16 inputs with fp32 accumulation)
// against the float64 reference.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/device_array.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "kernels/gemm.hpp"
#include "tests/cuda_skip.hpp"

using skew::Device;
using skew::DType;
using skew::Tensor;

TEST_CASE("cuda tensor: host -> device -> host copies are exact", "[cuda]") {
  SKEW_REQUIRE_GPU();
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.1f * static_cast<float>(i)) * 100.0f;
  const Tensor host = Tensor::from_vector(values, {10, 100});
  Tensor dev = host.to(Device::Cuda);
  CHECK(dev.device() == Device::Cuda);
  CHECK(dev.describe() == "F32[10,100]@cuda");
  Tensor dev2 = Tensor::zeros({10, 100}, DType::F32, Device::Cuda);
  dev2.copy_from(dev);  // device to device
  CHECK(dev2.to(Device::Host).to_float_vector() == values);
  CHECK(dev.clone().device() == Device::Cuda);
  CHECK(Tensor::zeros({4}, DType::I64, Device::Cuda).to(Device::Host).to_float_vector() == std::vector<float>(4, 0.0f));

  // Half types travel as raw bits.
  Tensor bf = Tensor::empty({10, 100}, DType::BF16);
  bf.copy_from(host);
  const Tensor bf_back = bf.to(Device::Cuda).to(Device::Host);
  CHECK(std::memcmp(bf_back.raw(), bf.raw(), bf.nbytes()) == 0);
  CHECK(Tensor::empty({0}, DType::F32, Device::Cuda).to(Device::Host).numel() == 0);

  Tensor dev_half = Tensor::empty({10, 100}, DType::F16, Device::Cuda);
  CHECK_THROWS_WITH(dev_half.copy_from(dev), Catch::Contains("is host-only"));
  CHECK_THROWS_WITH(dev.to_float_vector(), Catch::Contains("needs a host tensor"));
}

TEST_CASE("cuda gemm: cuBLAS matches the float64 reference, fp32 and bf16", "[cuda][gemm]") {
  SKEW_REQUIRE_GPU();
  const int m = 33, n = 17, k = 65;
  for (const bool bf16 : {false, true})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const int pad : {0, 5}) {
          skew::kernels::GemmShape s;
          s.trans_a = ta;
          s.trans_b = tb;
          s.m = m;
          s.n = n;
          s.k = k;
          const int a_cols = ta ? m : k, a_rows = ta ? k : m, b_cols = tb ? k : n, b_rows = tb ? n : k;
          const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
          if (pad) {
            s.lda = lda;
            s.ldb = ldb;
            s.ldc = ldc;
          }
          skew::Rng rng(5, static_cast<std::uint64_t>(ta * 4 + tb * 2 + (pad > 0)));
          const auto fill = [&](std::size_t count) {
            std::vector<float> v(count);
            for (auto& x : v) x = 2.0f * rng.uniform() - 1.0f;
            return v;
          };
          const auto a = fill(static_cast<std::size_t>(a_rows * lda));
          const auto b = fill(static_cast<std::size_t>(b_rows * ldb));
          const auto c = fill(static_cast<std::size_t>(m * ldc));
          Tensor da = Tensor::from_vector(a, {a_rows, lda}).to(Device::Cuda);
          Tensor db = Tensor::from_vector(b, {b_rows, ldb}).to(Device::Cuda);
          Tensor dc = Tensor::from_vector(c, {m, ldc}).to(Device::Cuda);
          (bf16 ? skew::kernels::gemm_bf16 : skew::kernels::gemm)(Device::Cuda, s, 1.5f, da.data<float>(),
                                                                  db.data<float>(), 0.25f, dc.data<float>());
          const auto got = dc.to(Device::Host).to_float_vector();
          // bf16: the reference multiplies the rounded inputs exactly.
          const auto rounded = [&](std::vector<float> v) {
            if (bf16)
              for (auto& x : v) x = skew::round_to_bf16(x);
            return v;
          };
          std::vector<double> ref(c.begin(), c.end());
          skew::kernels::gemm_reference(s, 1.5, rounded(a).data(), rounded(b).data(), 0.25, ref.data());
          INFO("bf16 " << bf16 << " trans_a " << ta << " trans_b " << tb << " pad " << pad);
          for (std::size_t i = 0; i < ref.size(); ++i)
            REQUIRE(std::fabs(got[i] - ref[i]) <= 1e-4 * (1.0 + std::fabs(ref[i])));
        }
}

TEST_CASE("cuda device array: copies both ways, and a released block is reused from the cache", "[cuda]") {
  SKEW_REQUIRE_GPU();
  skew::DeviceArray<float> a(Device::Cuda);
  a.assign_from(std::vector<float>{1.5f, -2.0f, 3.25f});
  a.resize(5);  // kept values, zeroed tail, on the device
  CHECK(a.host_copy() == std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 0.0f});
  skew::DeviceArray<float> b = a;
  CHECK(b.device() == Device::Cuda);
  CHECK(b.data() != a.data());
  CHECK(b.host_copy() == a.host_copy());
  skew::device_memory::release_cached();
  const void* block = nullptr;
  {
    skew::DeviceArray<float> c(Device::Cuda);
    c.resize_for_overwrite(1 << 20);
    block = c.data();
  }
  CHECK(skew::device_memory::cached_blocks() == 1);
  skew::DeviceArray<float> d(Device::Cuda);
  d.resize_for_overwrite(1 << 20);  // the same size: the cached block, no cudaMalloc
  CHECK(d.data() == block);
  CHECK(skew::device_memory::cached_blocks() == 0);
}
