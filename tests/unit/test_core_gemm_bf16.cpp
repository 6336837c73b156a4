// Both CPU paths of gemm_bf16 (the AVX512-BF16 kernel, skipped on CPUs without it, and the
// portable rounded SGEMM) against a float64 reference on bf16-rounded inputs: every transpose
// combination, padded leading dimensions, edge tiles in m and n, odd k, k blocking, alpha and beta
// (beta == 0 on a C full of NaN).
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <vector>

#include "kernels/cpu/gemm_bf16.hpp"
#include "tests/unit/random_matrix.hpp"

using skew::kernels::GemmShape;
namespace cpu = skew::kernels::cpu;

namespace {

constexpr std::uint64_t kSeed = 7;

struct Case {
  bool trans_a, trans_b;
  int m, n, k, pad;
  float alpha, beta;
};

std::string describe(const Case& t) {
  std::ostringstream os;
  os << "trans_a " << t.trans_a << " trans_b " << t.trans_b << " m " << t.m << " n " << t.n << " k " << t.k << " pad "
     << t.pad << " alpha " << t.alpha << " beta " << t.beta;
  return os.str();
}

// Runs one case and checks every element of C, padding included. Returns the largest ratio of
// |C - (product of the unrounded inputs)| to the tolerance, which shows whether rounding happened.
using Gemm = void (*)(const GemmShape&, float, const float*, const float*, float, float*);

// The paths this CPU can run, with their names.
std::vector<std::pair<const char*, Gemm>> implementations() {
  std::vector<std::pair<const char*, Gemm>> out = {{"rounded sgemm", cpu::gemm_bf16_rounded_sgemm}};
  if (cpu::has_avx512_bf16())
    out.push_back({"avx512_bf16", cpu::gemm_bf16_avx512});
  else
    WARN("AVX512-BF16 kernel skipped: this CPU has no AVX512-BF16");
  return out;
}

double check_case(Gemm gemm, const Case& t) {
  GemmShape s;
  s.trans_a = t.trans_a;
  s.trans_b = t.trans_b;
  s.m = t.m;
  s.n = t.n;
  s.k = t.k;
  const int a_rows = t.trans_a ? t.k : t.m, a_cols = t.trans_a ? t.m : t.k;
  const int b_rows = t.trans_b ? t.n : t.k, b_cols = t.trans_b ? t.k : t.n;
  s.lda = a_cols + t.pad;
  s.ldb = b_cols + t.pad;
  s.ldc = t.n + t.pad;
  const auto a = random_matrix(static_cast<std::size_t>(a_rows) * s.lda, kSeed, 1);
  const auto b = random_matrix(static_cast<std::size_t>(b_rows) * s.ldb, kSeed, 2);
  // beta == 0 must not read C: NaN there would poison any product that did.
  auto c = t.beta == 0.0f ? std::vector<float>(static_cast<std::size_t>(t.m) * s.ldc, std::nanf(""))
                          : random_matrix(static_cast<std::size_t>(t.m) * s.ldc, kSeed, 3);
  const auto c0 = c;
  gemm(s, t.alpha, a.data(), b.data(), t.beta, c.data());

  auto op_a = [&](int i, int p) { return a[t.trans_a ? std::size_t(p) * s.lda + i : std::size_t(i) * s.lda + p]; };
  auto op_b = [&](int p, int j) { return b[t.trans_b ? std::size_t(j) * s.ldb + p : std::size_t(p) * s.ldb + j]; };
  double worst_unrounded_ratio = 0;
  INFO(describe(t));
  for (int i = 0; i < t.m; ++i)
    for (int j = 0; j < s.ldc; ++j) {
      const std::size_t idx = std::size_t(i) * s.ldc + j;
      INFO("C(" << i << ", " << j << ")");
      if (j >= t.n) {  // padding: untouched
        REQUIRE((std::isnan(c0[idx]) ? std::isnan(c[idx]) : c[idx] == c0[idx]));
        continue;
      }
      double rounded = 0, unrounded = 0, magnitude = 0;
      for (int p = 0; p < t.k; ++p) {
        const double x = skew::round_to_bf16(op_a(i, p)), y = skew::round_to_bf16(op_b(p, j));
        rounded += x * y;
        magnitude += std::fabs(x * y);
        unrounded += double(op_a(i, p)) * op_b(p, j);
      }
      const double beta_c = t.beta == 0.0f ? 0.0 : double(t.beta) * c0[idx];
      const double expected = t.alpha * rounded + beta_c;
      // Probabilistic bound for fp32 accumulation of k terms (Higham and Mary 2019): error below
      // lambda sqrt(k) u times the sum of |terms|, u = 2^-24, lambda = 4; plus two roundings for the
      // alpha/beta update. The largest error observed here is 12% of it.
      const double u = std::ldexp(1.0, -24), lambda = 4.0;
      const double scale = std::fabs(t.alpha) * magnitude + std::fabs(beta_c);
      const double tolerance = lambda * u * (std::sqrt(double(t.k)) + 2.0) * scale;
      REQUIRE(std::fabs(c[idx] - expected) <= tolerance);
      worst_unrounded_ratio =
          std::max(worst_unrounded_ratio, std::fabs(c[idx] - (t.alpha * unrounded + beta_c)) / tolerance);
    }
  return worst_unrounded_ratio;
}

}  // namespace

TEST_CASE("gemm_bf16 CPU paths: match the float64 reference on bf16-rounded inputs", "[gemm]") {
  // m and n off the 8 x 32 and 16 x 16 tiles, k odd and 1, one k block and several (k block 256,
  // row block 128), columns past the 512-column block.
  const int shapes[][3] = {{1, 1, 1},  {7, 33, 65},    {65, 130, 7}, {33, 7, 130}, {130, 65, 33},
                           {9, 17, 1}, {200, 40, 300}, {9, 600, 33}, {45, 12, 19}};
  for (const auto& [name, gemm] : implementations())
    for (const auto& shape : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const int pad : {0, 5})
            for (const float beta : {0.0f, 0.5f}) {
              const Case t{ta, tb, shape[0], shape[1], shape[2], pad, 0.75f, beta};
              INFO(name << ": " << describe(t));
              CHECK(check_case(gemm, t) > 10.0);
            }
}

TEST_CASE("gemm_bf16 CPU paths: weight-gradient shape with k = 2048", "[gemm]") {
  // dW = X^T dY over 2048 tokens: A transposed, k far past one block.
  for (const auto& [name, gemm] : implementations())
    for (const float beta : {0.0f, 0.5f}) {
      const Case t{true, false, 64, 192, 2048, 0, 1.5f, beta};
      INFO(name << ": " << describe(t));
      CHECK(check_case(gemm, t) > 10.0);
    }
}

TEST_CASE("gemm_bf16 CPU paths: k = 0 scales C by beta", "[gemm]") {
  GemmShape s;
  s.m = 2;
  s.n = 3;
  s.k = 0;
  s.lda = 1;
  s.ldb = 3;
  s.ldc = 3;
  const float none = 0.0f;  // k = 0: no element of A or B is read
  for (const auto& [name, gemm] : implementations()) {
    INFO(name);
    std::vector<float> c{1, 2, 3, 4, 5, 6};
    gemm(s, 1.0f, &none, &none, 0.5f, c.data());
    CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3});
    c.assign(6, std::nanf(""));
    gemm(s, 1.0f, &none, &none, 0.0f, c.data());
    CHECK(c == std::vector<float>(6, 0.0f));
  }
}
