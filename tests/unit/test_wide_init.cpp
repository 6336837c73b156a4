// The latent rows' initial draws: the Box-Muller transform's float log and sincos (lib/wide/
// model.hpp) against libm in double over every input the draws can give, and the rows a model
// is created with against the normal distribution they are drawn from and against the same
// Philox words transformed in double.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/rng.hpp"
#include "lib/wide/model.hpp"

using namespace skew;
using namespace skew::wide;

TEST_CASE("log_of_unit and sincos_of_turn are within 1e-6 of libm over the draws' whole range") {
  // u1 = 1 - k 2^-24 and u2 = k 2^-24, k < 2^24: every 7th k (2.4M values) plus both ends.
  double log_error = 0, sin_error = 0, cos_error = 0;
  const auto check = [&](std::uint32_t k) {
    const float unit = float(k) * (1.0f / 16777216.0f);
    const float u1 = 1.0f - unit;
    const double want_log = std::log(double(u1));
    log_error = std::max(log_error, std::abs(double(log_of_unit(u1)) - want_log) / std::max(1.0, std::abs(want_log)));
    float s = 0, c = 0;
    sincos_of_turn(unit, s, c);
    const double angle = 2 * M_PI * double(unit);
    sin_error = std::max(sin_error, std::abs(double(s) - std::sin(angle)));
    cos_error = std::max(cos_error, std::abs(double(c) - std::cos(angle)));
  };
  for (std::uint32_t k = 0; k < (1u << 24); k += 7) check(k);
  for (std::uint32_t q = 1; q < 4; ++q)  // each quadrant's first value and the one before it
    for (const std::uint32_t k : {q << 22, (q << 22) - 1}) check(k);
  check((1u << 24) - 1);
  INFO("log " << log_error << ", sin " << sin_error << ", cos " << cos_error);
  CHECK(log_error < 1e-6);
  CHECK(sin_error < 1e-6);
  CHECK(cos_error < 1e-6);
  CHECK(log_of_unit(1.0f) == 0.0f);
}

TEST_CASE("a model's latent rows are N(0, init_std^2) draws: moments, and the same Philox words in double") {
  const kernels::WideShape shape{kernels::WideKind::FFM, 3001, 5, 3};  // latent 15: odd, rows of 16 floats
  const float init_std = 0.05f;
  const WideModel m = WideModel::create(shape, 11, init_std, 2);
  const int row_len = shape.row_len(), latent = shape.latent_len();
  double sum = 0, squares = 0, fourth = 0, worst = 0;
  std::int64_t n = 0;
  for (std::int64_t f = 0; f < shape.num_features; ++f) {
    const float* v = m.params.data() + 2 + f * row_len;
    for (int j = 0; j < latent; ++j) {
      // Value j: Box-Muller pair j / 2 from Philox words 4q..4q+3 of (f, q = j / 4), in double.
      const Philox4 w = philox4x32_10(std::uint64_t(f), std::uint64_t(j / 4), 11);
      const int pair = (j % 4) / 2;
      const double u1 = 1.0 - double(w.v[2 * pair] >> 8) / 16777216.0, u2 = double(w.v[2 * pair + 1] >> 8) / 16777216.0;
      const double radius = init_std * std::sqrt(-2.0 * std::log(u1));
      const double want = j % 2 == 0 ? radius * std::cos(2 * M_PI * u2) : radius * std::sin(2 * M_PI * u2);
      worst = std::max(worst, std::abs(double(v[j]) - want));
      const double z = v[j] / init_std;
      sum += z;
      squares += z * z;
      fourth += z * z * z * z;
      ++n;
    }
  }
  INFO("largest difference from double: " << worst);
  CHECK(worst < 2e-6 * init_std * 6);  // within a few float ulps of a 6-sigma value
  const double mean = sum / double(n), variance = squares / double(n) - mean * mean;
  // 45015 draws: the sample mean's sd is 1 / sqrt(n) = 0.0047, the variance's sqrt(2 / n) = 0.0067,
  // the fourth moment's (E z^4 = 3) sqrt(96 / n) = 0.046; bounds at 5 sd.
  CHECK(std::abs(mean) < 0.024);
  CHECK(std::abs(variance - 1) < 0.034);
  CHECK(std::abs(fourth / double(n) - 3) < 0.23);
}
