// Philox4x32-10: Random123 known answers, reproducibility for (seed, stream, index), stream
// independence and the moments of uniform(), normal() and below().
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"

namespace {
// Counter words c0..c3 and key words k0..k1 as in Random123's kat_vectors file.
skew::Philox4 philox_words(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0,
                           std::uint32_t k1) {
  const std::uint64_t lo = (static_cast<std::uint64_t>(c1) << 32) | c0;
  const std::uint64_t hi = (static_cast<std::uint64_t>(c3) << 32) | c2;
  const std::uint64_t key = (static_cast<std::uint64_t>(k1) << 32) | k0;
  return skew::philox4x32_10(hi, lo, key);
}

struct Moments {
  double mean = 0, var = 0;
};
template <typename F>
Moments moments(int n, F draw) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = draw();
    s += x;
    s2 += x * x;
  }
  Moments m;
  m.mean = s / n;
  m.var = s2 / n - m.mean * m.mean;
  return m;
}
}  // namespace

TEST_CASE("rng: Philox4x32-10 matches the Random123 known-answer vectors", "[rng]") {
  // Random123 tests/kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> output[4].
  const auto zero = philox_words(0, 0, 0, 0, 0, 0);
  CHECK(zero.v[0] == 0x6627e8d5u);
  CHECK(zero.v[1] == 0xe169c58du);
  CHECK(zero.v[2] == 0xbc57ac4cu);
  CHECK(zero.v[3] == 0x9b00dbd8u);
  const auto ones = philox_words(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  CHECK(ones.v[0] == 0x408f276du);
  CHECK(ones.v[1] == 0x41c83b0eu);
  CHECK(ones.v[2] == 0xa20bc7c6u);
  CHECK(ones.v[3] == 0x6d5451fdu);
  const auto pi = philox_words(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.v[0] == 0xd16cfe09u);
  CHECK(pi.v[1] == 0x94fdccebu);
  CHECK(pi.v[2] == 0x5001e420u);
  CHECK(pi.v[3] == 0x24126ea1u);
}

TEST_CASE("rng: a run of Philox calls equals the calls one by one, across the low word's carry", "[rng]") {
  // Random123's pi vector through a run: counter (c3 c2, c1 c0), key (k1 k0).
  std::uint32_t words[4][skew::kPhiloxLanes];
  skew::philox4x32_10_run(0x0370734413198a2eull, 0x85a308d3243f6a88ull, 1, 0x299f31d0a4093822ull, words);
  CHECK(words[0][0] == 0xd16cfe09u);
  CHECK(words[3][0] == 0x24126ea1u);
  for (const int n : {1, 7, skew::kPhiloxLanes})
    for (const std::uint64_t first :
         {std::uint64_t(0), std::uint64_t(0xffffffffu) - 3, std::uint64_t(0x123456789ull)}) {
      skew::philox4x32_10_run(0xfeedfacecafef00dull, first, n, 0x9e3779b97f4a7c15ull, words);
      for (int i = 0; i < n; ++i) {
        const skew::Philox4 one =
            skew::philox4x32_10(0xfeedfacecafef00dull, first + std::uint64_t(i), 0x9e3779b97f4a7c15ull);
        INFO("n " << n << " first " << first << " call " << i);
        for (int j = 0; j < 4; ++j) REQUIRE(words[j][i] == one.v[j]);
      }
    }
}

TEST_CASE("rng: a draw depends only on (seed, stream, index)", "[rng]") {
  skew::Rng a(1234, 5);
  std::vector<std::uint32_t> first(37);
  for (auto& x : first) x = a.next_u32();
  CHECK(a.offset() == 37);
  // Restarting at any offset reproduces the tail.
  for (std::uint64_t start : {0u, 1u, 3u, 4u, 17u, 36u}) {
    skew::Rng b(1234, 5, start);
    for (std::size_t i = start; i < first.size(); ++i) REQUIRE(b.next_u32() == first[i]);
  }
  // Draw i is word i % 4 of the block at counter i / 4.
  const auto block = skew::philox4x32_10(5, 2, 1234);
  for (int w = 0; w < 4; ++w) CHECK(first[static_cast<std::size_t>(8 + w)] == block.v[w]);
  skew::Rng c(1234, 5);
  CHECK(c.seed() == 1234);
  CHECK(c.stream() == 5);
  CHECK(c.next_u64() == ((static_cast<std::uint64_t>(first[0]) << 32) | first[1]));
}

TEST_CASE("rng: streams and seeds are independent", "[rng]") {
  const int n = 20000;
  skew::Rng s0(42, 0), s1(42, 1), other_seed(43, 0);
  double cross = 0, cross_seed = 0;
  int equal = 0;
  for (int i = 0; i < n; ++i) {
    const double a = s0.uniform() - 0.5, b = s1.uniform() - 0.5, c = other_seed.uniform() - 0.5;
    cross += a * b;
    cross_seed += a * c;
    equal += a == b;
  }
  // Correlation of independent uniforms: sd 1/sqrt(n); variance of each is 1/12.
  const double tol = 5.0 / std::sqrt(static_cast<double>(n));
  CHECK(std::fabs(cross / n * 12.0) < tol);
  CHECK(std::fabs(cross_seed / n * 12.0) < tol);
  CHECK(equal < 5);
}

TEST_CASE("rng: uniform, normal and below have the right moments", "[rng]") {
  const int n = 200000;
  skew::Rng r(7, 3);
  float lo = 1, hi = 0;
  const auto u = moments(n, [&] {
    const float x = r.uniform();
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    return x;
  });
  CHECK(lo >= 0.0f);
  CHECK(hi < 1.0f);
  // Standard errors: mean sqrt(1/12/n) ~ 6.5e-4, variance ~ 2e-4; 5 sigma margins.
  CHECK(u.mean == Approx(0.5).margin(5 * std::sqrt(1.0 / 12 / n)));
  CHECK(u.var == Approx(1.0 / 12).margin(5 * std::sqrt(1.0 / 180 / n)));

  const auto g = moments(n, [&] { return r.normal(); });
  CHECK(g.mean == Approx(0.0).margin(5 / std::sqrt(static_cast<double>(n))));
  CHECK(g.var == Approx(1.0).margin(5 * std::sqrt(2.0 / n)));

  std::vector<int> hist(10, 0);
  for (int i = 0; i < n; ++i) {
    const auto k = r.below(10);
    REQUIRE(k < 10);
    ++hist[k];
  }
  // Chi-square with 9 degrees of freedom: 99.99% quantile is about 33.7.
  double chi2 = 0;
  for (int c : hist) chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
  CHECK(chi2 < 33.7);
  CHECK(r.below(1) == 0);
}
