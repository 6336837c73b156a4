// CPU GEMM (OpenBLAS) against the float64 reference: every transpose combination, non-square
// shapes, strided leading dimensions and alpha/beta.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "kernels/gemm.hpp"
#include "tests/unit/random_matrix.hpp"

using skew::kernels::GemmShape;

constexpr std::uint64_t kSeed = 99;

TEST_CASE("gemm: CPU matches the float64 reference", "[gemm]") {
  const int m = 7, n = 5, k = 9;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const int pad : {0, 3}) {
        GemmShape s;
        s.trans_a = ta;
        s.trans_b = tb;
        s.m = m;
        s.n = n;
        s.k = k;
        const int a_cols = ta ? m : k, a_rows = ta ? k : m;
        const int b_cols = tb ? k : n, b_rows = tb ? n : k;
        // pad > 0: every matrix is a view into a wider one (ld > columns).
        s.lda = pad ? a_cols + pad : 0;
        s.ldb = pad ? b_cols + pad : 0;
        s.ldc = pad ? n + pad : 0;
        const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
        const auto a = random_matrix(static_cast<std::size_t>(a_rows * lda), kSeed, 1);
        const auto b = random_matrix(static_cast<std::size_t>(b_rows * ldb), kSeed, 2);
        auto c = random_matrix(static_cast<std::size_t>(m * ldc), kSeed, 3);
        std::vector<double> ref(c.begin(), c.end());
        const float alpha = 0.75f, beta = -0.5f;
        skew::kernels::gemm(skew::Device::Host, s, alpha, a.data(), b.data(), beta, c.data());
        skew::kernels::gemm_reference(s, alpha, a.data(), b.data(), beta, ref.data());
        INFO("trans_a " << ta << " trans_b " << tb << " pad " << pad);
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < ldc; ++j) {
            const auto idx = static_cast<std::size_t>(i * ldc + j);
            REQUIRE(std::fabs(c[idx] - ref[idx]) <= 1e-5 * (1.0 + std::fabs(ref[idx])));
          }
      }
}

TEST_CASE("gemm: degenerate shapes and errors", "[gemm]") {
  GemmShape s;
  s.m = 3;
  s.n = 2;
  s.k = 0;  // C = beta * C
  std::vector<float> c{1, 2, 3, 4, 5, 6};
  skew::kernels::gemm(skew::Device::Host, s, 1.0f, nullptr, nullptr, 2.0f, c.data());
  CHECK(c == std::vector<float>{2, 4, 6, 8, 10, 12});
  s.m = 0;
  skew::kernels::gemm(skew::Device::Host, s, 1.0f, nullptr, nullptr, 2.0f, nullptr);
  s.m = -1;
  CHECK_THROWS_WITH(skew::kernels::gemm(skew::Device::Host, s, 1.0f, nullptr, nullptr, 0.0f, nullptr),
                    Catch::Contains("negative dimension"));
  if (!skew::cuda_built()) {
    s.m = 1;
    s.n = 1;
    s.k = 1;
    float one = 1;
    CHECK_THROWS_WITH(skew::kernels::gemm(skew::Device::Cuda, s, 1.0f, &one, &one, 0.0f, &one),
                      Catch::Contains("build without CUDA"));
  }
}
