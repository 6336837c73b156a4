// The CPU twins added for the dense ops on GPUs against float64 on odd shapes: the bias
// broadcast, the bias-gradient column sum and the residual add (kernels/moe_elementwise.hpp), and
// the strided-batched GEMMs (kernels/gemm.hpp) on attention-like operands: column blocks of a
// wider row-major buffer, every transpose combination, fp32 and bf16.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_elementwise.hpp"

using namespace skew;
namespace km = skew::kernels::moe;

namespace {
std::vector<float> normal(std::size_t n, std::uint64_t stream, float offset = 0.0f) {
  Rng rng(29, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + static_cast<float>(rng.normal());
  return v;
}
}  // namespace

TEST_CASE("bias broadcast fills every row with the bias", "[moe][ops][device]") {
  const std::size_t rows = 37, cols = 131;
  const auto bias = normal(cols, 1);
  std::vector<float> y(rows * cols, -1.0f);
  km::broadcast_row(Device::Host, rows, cols, bias.data(), y.data());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) REQUIRE(y[i * cols + j] == bias[j]);
}

TEST_CASE("column sum adds each column's float64 sum onto the accumulator", "[moe][ops][device]") {
  const std::size_t rows = 1037, cols = 131;
  const auto m = normal(rows * cols, 2, 0.5f);  // offset: column sums far from zero, rounding shows
  auto sum = normal(cols, 3);
  std::vector<double> want(sum.begin(), sum.end());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) want[j] += m[i * cols + j];
  km::column_sum_add(Device::Host, rows, cols, m.data(), sum.data());
  for (std::size_t j = 0; j < cols; ++j) {
    INFO("column " << j);
    CHECK(sum[j] == Approx(want[j]).epsilon(1e-5).margin(1e-3));
  }
}

TEST_CASE("residual add equals the float64 sum", "[moe][ops][device]") {
  const std::size_t n = 4099;
  auto x = normal(n, 4);
  const auto y = normal(n, 5);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<double>(x[i]) + y[i];
  km::add_inplace(Device::Host, n, x.data(), y.data());
  for (std::size_t i = 0; i < n; ++i) REQUIRE(x[i] == Approx(want[i]).epsilon(1e-6).margin(1e-6));
}

TEST_CASE("strided-batched GEMM equals float64 per matrix on attention-like layouts", "[moe][ops][device]") {
  // As attention's operands: A stacked [rows_a, cols_a] blocks (the probabilities, stride = one
  // block), B column blocks of a wider row-major buffer (the heads of qkv, stride = the block's
  // width), C column blocks too, with unused columns at the right; odd sizes, every transpose.
  const bool bf16 = GENERATE(false, true);
  const bool trans_a = GENERATE(false, true), trans_b = GENERATE(false, true);
  INFO("bf16 " << bf16 << " trans_a " << trans_a << " trans_b " << trans_b);
  const int count = 5, m = 23, n = 9, k = 11;
  const int rows_a = trans_a ? k : m, cols_a = trans_a ? m : k;
  const int rows_b = trans_b ? n : k, cols_b = trans_b ? k : n;
  kernels::GemmShape s;
  s.trans_a = trans_a, s.trans_b = trans_b, s.m = m, s.n = n, s.k = k;
  s.lda = cols_a, s.ldb = count * cols_b + 2, s.ldc = count * n + 3;
  const kernels::BatchStrides strides{static_cast<std::int64_t>(rows_a) * cols_a, cols_b, n, count};
  const auto a = normal(static_cast<std::size_t>(count) * rows_a * cols_a, 6);
  const auto b = normal(static_cast<std::size_t>(rows_b) * s.ldb, 7);
  const auto c0 = normal(static_cast<std::size_t>(m) * s.ldc, 8);
  std::vector<float> c = c0;
  if (bf16)
    kernels::gemm_bf16_strided_batched(Device::Host, s, 0.5f, a.data(), b.data(), 2.0f, c.data(), strides);
  else
    kernels::gemm_strided_batched(Device::Host, s, 0.5f, a.data(), b.data(), 2.0f, c.data(), strides);
  // float64 per matrix, on operands rounded to bf16 when the product ran in bf16.
  std::vector<float> a_in(a), b_in(b);
  if (bf16) {
    for (auto& x : a_in) x = round_to_bf16(x);
    for (auto& x : b_in) x = round_to_bf16(x);
  }
  std::vector<double> want(c0.begin(), c0.end());
  for (int i = 0; i < count; ++i)
    kernels::gemm_reference(s, 0.5, a_in.data() + i * strides.a, b_in.data() + i * strides.b, 2.0,
                            want.data() + i * strides.c);
  for (std::size_t at = 0; at < c.size(); ++at) {
    INFO("row " << at / s.ldc << " column " << at % s.ldc);
    // want keeps c0 in the columns past the last matrix: they must come back untouched
    REQUIRE(c[at] == Approx(want[at]).epsilon(1e-5).margin(1e-4));
  }
}
