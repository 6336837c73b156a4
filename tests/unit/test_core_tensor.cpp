// Tensor: host copies, dtype conversions against known bit patterns (round to nearest even),
// and the error a CUDA tensor gives where no GPU is usable.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"

using skew::Device;
using skew::DType;
using skew::Tensor;

namespace {
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

TEST_CASE("tensor: dtype sizes and names", "[tensor]") {
  CHECK(skew::dtype_size(DType::F32) == 4);
  CHECK(skew::dtype_size(DType::F64) == 8);
  CHECK(skew::dtype_size(DType::BF16) == 2);
  CHECK(skew::dtype_size(DType::F16) == 2);
  CHECK(skew::dtype_size(DType::I64) == 8);
  CHECK(skew::dtype_size(DType::U8) == 1);
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    CHECK(skew::dtype_from_name(skew::dtype_name(d)) == d);
  CHECK_THROWS_WITH(skew::dtype_from_name("F8"), Catch::Contains("unsupported dtype 'F8'"));
}

TEST_CASE("tensor: host copies are deep and keep shape and dtype", "[tensor]") {
  std::vector<float> values(12);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 2.0f;
  Tensor a = Tensor::from_vector(values, {3, 4});
  CHECK(a.describe() == "F32[3,4]@host");
  CHECK(a.numel() == 12);
  CHECK(a.nbytes() == 48);
  CHECK(a.dim(1) == 4);
  Tensor b = a.to(Device::Host);
  Tensor c = a.clone();
  a.data<float>()[5] = 99.0f;
  CHECK(b.data<float>()[5] == values[5]);
  CHECK(c.data<float>()[5] == values[5]);
  CHECK(b.shape() == a.shape());
  CHECK(b.dtype() == DType::F32);

  Tensor d = Tensor::zeros({3, 4}, DType::F32);
  for (std::size_t i = 0; i < 12; ++i) CHECK(d.data<float>()[i] == 0.0f);
  d.copy_from(b);
  CHECK(d.to_float_vector() == values);

  Tensor empty = Tensor::empty({0, 5}, DType::I64);
  CHECK(empty.numel() == 0);
  CHECK(empty.to(Device::Host).numel() == 0);
}

TEST_CASE("tensor: misuse is reported clearly", "[tensor]") {
  Tensor a = Tensor::from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {2, 2});
  CHECK_THROWS_WITH(a.data<float>(), Catch::Contains("tensor I32[2,2]@host accessed as F32"));
  CHECK_THROWS_WITH(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                    Catch::Contains("holds 4 elements, given 3"));
  CHECK_THROWS_WITH(Tensor::empty({2, -1}, DType::F32), Catch::Contains("negative dimension -1"));
  Tensor b = Tensor::zeros({4}, DType::I32);
  CHECK_THROWS_WITH(b.copy_from(a), Catch::Contains("copy_from shape mismatch"));
  Tensor c = Tensor::zeros({2, 2}, DType::BF16);
  CHECK_THROWS_WITH(c.copy_from(a), Catch::Contains("unsupported conversion I32[2,2]@host -> BF16[2,2]@host"));
  CHECK_THROWS_AS(Tensor().to(Device::Host), skew::Error);
}

TEST_CASE("tensor: bf16 conversion, bit patterns and round to nearest even", "[tensor]") {
  CHECK(skew::float_to_bf16(1.0f) == 0x3F80);
  CHECK(skew::float_to_bf16(-2.0f) == 0xC000);
  CHECK(skew::float_to_bf16(0.0f) == 0x0000);
  CHECK(skew::float_to_bf16(-0.0f) == 0x8000);
  CHECK(skew::float_to_bf16(from_bits(0x40490FDB)) == 0x4049);              // pi rounds down
  CHECK(skew::float_to_bf16(from_bits(0x3F808000)) == 0x3F80);              // tie, even stays
  CHECK(skew::float_to_bf16(from_bits(0x3F818000)) == 0x3F82);              // tie, odd rounds up
  CHECK(skew::float_to_bf16(from_bits(0x3F808001)) == 0x3F81);              // just above the tie
  CHECK(skew::float_to_bf16(from_bits(0x3F807FFF)) == 0x3F80);              // just below the tie
  CHECK(skew::float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds to inf
  CHECK(skew::float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(skew::float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(std::isnan(skew::bf16_to_float(skew::float_to_bf16(from_bits(0x7F800001)))));  // NaN stays NaN
  CHECK(std::isnan(skew::bf16_to_float(skew::float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(skew::bf16_to_float(0x3F80) == 1.0f);
  CHECK(skew::bf16_to_float(0x4049) == 3.140625f);
  // Every non-NaN bf16 value survives the round trip through float exactly.
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = skew::bf16_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    REQUIRE(skew::float_to_bf16(f) == b);
    REQUIRE(bits_of(f) == b << 16);
  }
}

TEST_CASE("tensor: f16 conversion, bit patterns and round to nearest even", "[tensor]") {
  CHECK(skew::float_to_f16(1.0f) == 0x3C00);
  CHECK(skew::float_to_f16(-2.0f) == 0xC000);
  CHECK(skew::float_to_f16(0.5f) == 0x3800);
  CHECK(skew::float_to_f16(-0.0f) == 0x8000);
  CHECK(skew::float_to_f16(65504.0f) == 0x7BFF);  // largest half
  CHECK(skew::float_to_f16(65519.0f) == 0x7BFF);  // below the tie
  CHECK(skew::float_to_f16(65520.0f) == 0x7C00);  // tie with odd mantissa: overflows to inf
  CHECK(skew::float_to_f16(1e10f) == 0x7C00);
  CHECK(skew::float_to_f16(-1e10f) == 0xFC00);
  CHECK(skew::float_to_f16(1.0f / 3.0f) == 0x3555);
  CHECK(skew::float_to_f16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(skew::float_to_f16(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(skew::float_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: zero
  CHECK(skew::float_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(skew::float_to_f16(std::ldexp(3.0f, -25)) == 0x0002);         // 1.5 ulp: tie, odd rounds up
  CHECK(skew::float_to_f16(std::ldexp(5.0f, -25)) == 0x0002);         // 2.5 ulp: tie, even stays
  CHECK(skew::float_to_f16(std::ldexp(2047.0f, -25)) == 0x0400);      // largest-subnormal tie carries into normal
  CHECK(skew::float_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie, even stays
  CHECK(skew::float_to_f16(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);  // tie, odd rounds up
  CHECK(skew::float_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);
  CHECK(skew::float_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(std::isnan(skew::f16_to_float(skew::float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(skew::f16_to_float(0x3555) == Approx(0.333251953125).epsilon(0));
  CHECK(skew::f16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(skew::f16_to_float(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(skew::f16_to_float(0xFBFF) == -65504.0f);
  CHECK(std::isinf(skew::f16_to_float(0x7C00)));
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = skew::f16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    REQUIRE(skew::float_to_f16(f) == h);
  }
}

TEST_CASE("tensor: copy_from converts f32 <-> bf16/f16 on the host", "[tensor]") {
  const std::vector<float> values{1.0f, -2.0f, 0.333333f, 1.00390625f, 65504.0f, -0.0f};
  Tensor src = Tensor::from_vector(values, {6});
  for (DType half : {DType::BF16, DType::F16}) {
    Tensor h = Tensor::empty({6}, half);
    h.copy_from(src);
    const auto* bits = static_cast<const std::uint16_t*>(h.raw());
    for (std::size_t i = 0; i < values.size(); ++i)
      CHECK(bits[i] == (half == DType::BF16 ? skew::float_to_bf16(values[i]) : skew::float_to_f16(values[i])));
    Tensor back = Tensor::empty({6}, DType::F32);
    back.copy_from(h);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double tol = half == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
      CHECK(std::fabs(back.data<float>()[i] - values[i]) <= tol * std::fabs(values[i]));
    }
  }
  Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{-3, 0, 7}, {3});
  Tensor as_float = Tensor::empty({3}, DType::F32);
  as_float.copy_from(ints);
  CHECK(as_float.to_float_vector() == std::vector<float>{-3, 0, 7});
  CHECK(Tensor::from_vector(std::vector<double>{0.25, -8}, {2}).to_float_vector() == std::vector<float>{0.25f, -8.0f});
  CHECK(Tensor::from_vector(std::vector<std::uint8_t>{0, 255}, {2}).to_float_vector() == std::vector<float>{0, 255});
}

TEST_CASE("tensor: a CUDA tensor without a usable GPU is a clear error", "[tensor]") {
  if (skew::cuda_device_count() > 0) {
    SUCCEED("a GPU is visible; the device paths are covered by the CUDA tests");
    return;
  }
  const std::string why =
      skew::cuda_built() ? "no CUDA device is visible on this machine" : "this build of skew has no CUDA support";
  CHECK_THROWS_WITH(Tensor::empty({4}, DType::F32, Device::Cuda), Catch::Contains("allocating a CUDA tensor: " + why));
  Tensor host = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  CHECK_THROWS_WITH(host.to(Device::Cuda), Catch::Contains(why));
  CHECK_THROWS_AS(Tensor::zeros({4}, DType::F32, Device::Cuda), skew::Error);
}
