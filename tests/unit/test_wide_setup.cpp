// A wide model's set-up: the initial latent factors against a float64 Box-Muller reference on
// the Philox words, the same model bit for bit at 1 and 2 threads; the trainer's zero-page
// gradient (core/zero_pages.hpp) against plain zeros and the page faults it saves; FTRL's
// state on zero pages against the eagerly filled state of the same rule, bit for bit; the
// initialisation against Rng's one-value-at-a-time draws, bit for bit; AdaGrad's
// state on zero pages against eps-filled state, bit for bit, and saved with eps.
#include <sys/resource.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.hpp"
#include "core/zero_pages.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/optimizer.hpp"

using namespace skew;
using namespace skew::wide;
using kernels::WideKind;
using kernels::WideShape;

namespace {
// Latent j of feature f, in float64: words 4q..4q+3 (q = j / 4) of Philox(counter (f, q), seed),
// pair (j % 4) / 2 of them as (u1, u2), cosine for even j, sine for odd.
double reference_latent(std::uint64_t seed, std::int64_t f, int j, double init_std) {
  const Philox4 w = philox4x32_10(std::uint64_t(f), std::uint64_t(j / 4), seed);
  const int pair = (j % 4) / 2;
  const double u1 = 1.0 - double(w.v[2 * pair] >> 8) / 16777216.0, u2 = double(w.v[2 * pair + 1] >> 8) / 16777216.0;
  const double angle = 2.0 * M_PI * u2, radius = std::sqrt(-2.0 * std::log(u1));
  return init_std * radius * (j % 2 == 0 ? std::cos(angle) : std::sin(angle));
}
}  // namespace

TEST_CASE("initial wide model: N(0, std^2) latents from (seed, feature, j), the same at any thread count") {
  // 10007 features: several of create()'s blocks, the last one partial; latent lengths that are
  // and are not multiples of four.
  for (const WideShape shape : {WideShape{WideKind::FFM, 10007, 39, 4}, WideShape{WideKind::FM, 10007, 1, 7},
                                WideShape{WideKind::LR, 10007, 1, 0}}) {
    const WideModel one = WideModel::create(shape, 17, 0.05f, 1), two = WideModel::create(shape, 17, 0.05f, 2);
    REQUIRE(one.params.size() == shape.num_params());
    REQUIRE(two.params.size() == one.params.size());
    CHECK(std::memcmp(one.params.data(), two.params.data(), one.params.size() * sizeof(float)) == 0);
    CHECK(one.params[0] == 0.0f);
    const int row_len = shape.row_len();
    double sum = 0, sum_sq = 0, worst = 0;
    std::int64_t n = 0;
    for (std::int64_t f = 0; f < shape.num_features; ++f) {
      const float* row = one.params.data() + 1 + f * row_len;
      REQUIRE(row[0] == 0.0f);  // linear weight
      for (int j = 0; j < shape.latent_len(); ++j) {
        const double want = reference_latent(17, f, j, 0.05);
        worst = std::max(worst, std::fabs(double(row[1 + j]) - want));
        sum += row[1 + j];
        sum_sq += double(row[1 + j]) * row[1 + j];
        ++n;
      }
    }
    INFO("kind " << kernels::wide_kind_name(shape.kind) << " worst difference " << worst);
    CHECK(worst < 2e-6);  // float transcendental functions against float64 ones, values up to ~0.3
    if (n > 0) {
      const double mean = sum / double(n), std_dev = std::sqrt(sum_sq / double(n) - mean * mean);
      CHECK(std::fabs(mean) < 4 * 0.05 / std::sqrt(double(n)));
      CHECK(std_dev == Approx(0.05).epsilon(0.01));
    }
  }
  // Another seed gives another model.
  const WideShape fm{WideKind::FM, 100, 1, 4};
  CHECK(WideModel::create(fm, 1).params != WideModel::create(fm, 2).params);
}

namespace {
// The initialisation one value at a time through Rng's sequential draws: Rng(seed, f) draws 2p
// and 2p + 1 make Box-Muller pair p (values 2p, 2p + 1), with the transform's float log and
// sincos (checked against libm in test_wide_init.cpp). create() numbers its Philox calls itself,
// transforms a row's pairs together and splits features over threads: it must match this bit
// for bit.
std::vector<float> scalar_init(const WideShape& shape, std::uint64_t seed, float init_std) {
  std::vector<float> params(std::size_t(shape.num_params()), 0.0f);
  for (std::int64_t f = 0; f < shape.num_features; ++f) {
    Rng rng(seed, std::uint64_t(f));
    float* v = params.data() + 1 + f * shape.row_len() + 1;
    for (int j = 0; j < shape.latent_len(); j += 2) {
      const float u1 = 1.0f - rng.uniform(), u2 = rng.uniform();
      const float radius = init_std * std::sqrt(-2.0f * log_of_unit(u1));
      float s, c;
      sincos_of_turn(u2, s, c);
      v[j] = radius * c;
      if (j + 1 < shape.latent_len()) v[j + 1] = radius * s;
    }
  }
  return params;
}
}  // namespace

TEST_CASE("initialisation equals the one-value-at-a-time Rng reference bit for bit, at 1, 3 and 4 threads") {
  // Latent lengths 3, 17 and 3 x 17 (not multiples of four), feature counts that are odd and
  // not multiples of create()'s 4096-feature blocks.
  for (const WideShape shape : {WideShape{WideKind::FM, 37, 1, 3}, WideShape{WideKind::FM, 4099, 5, 17},
                                WideShape{WideKind::FFM, 4111, 3, 17}, WideShape{WideKind::FFM, 1, 1, 1}}) {
    const std::vector<float> want = scalar_init(shape, 0x5eed0000000bull, 0.07f);
    for (const int threads : {1, 3, 4}) {
      const WideModel got = WideModel::create(shape, 0x5eed0000000bull, 0.07f, threads);
      INFO(kernels::wide_kind_name(shape.kind)
           << " features " << shape.num_features << " k " << shape.k << " threads " << threads);
      REQUIRE(got.params.size() == want.size());
      CHECK(std::memcmp(got.params.data(), want.data(), want.size() * sizeof(float)) == 0);
      CHECK(std::count(got.params.begin(), got.params.end(), 0.0f) == 1 + shape.num_features);  // bias, linear
    }
  }
}

namespace {
// Gradients for the optimiser tests: a 64-bit LCG's top bits as a float in [-1, 1).
float lcg_uniform(std::uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return float(double(state >> 11) / double(1ull << 52) - 1.0);
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
}  // namespace

TEST_CASE("a zero-page vector reads as zeros and costs page faults only where it is written") {
  // 64 MiB: 16384 pages of 4 KiB (fewer if the kernel backs them with huge pages, never more).
  const std::size_t n = std::size_t(16) << 20, page_floats = 4096 / sizeof(float);
  const long before = minor_faults();
  ZeroPageVector<float> v(n);
  const long after_construction = minor_faults();
  CHECK(after_construction - before < 64);  // a std::vector<float>(n) writes all 16384 pages
  // Every 1000th page written, with values that are not zero, then every element read back.
  for (std::size_t i = 0; i < n; i += 1000 * page_floats) v[i + 7] = float(i % 977) + 0.5f;
  CHECK(minor_faults() - after_construction < 64);  // 17 pages written
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool written = i % (1000 * page_floats) == 7;
    if (v[i] != (written ? float((i - 7) % 977) + 0.5f : 0.0f)) ++nonzero;
  }
  CHECK(nonzero == 0);
  // A grown vector keeps its values and reads the new tail as zero.
  v.resize(n + 12345);
  CHECK(v[7] == 0.5f);
  CHECK(v[n + 12344] == 0.0f);
}

TEST_CASE(
    "FTRL's state on zero pages: set-up writes no page of an all-zero model, and steps match filled state bit for "
    "bit") {
  // LR, all parameters zero: neither n nor z is written at construction.
  const WideShape lr{WideKind::LR, std::int64_t(16) << 20, 1, 0};  // 64 MiB per state array
  OptimizerOptions o;
  o.kind = OptimizerKind::Ftrl;
  o.lr = 0.1f, o.beta = 1.0f, o.l1 = 0.002f, o.l2 = 0.01f;
  {
    const std::vector<float> zeros(std::size_t(lr.num_params()), 0.0f);
    const long before = minor_faults();
    const Optimizer ftrl(o, lr, zeros);
    CHECK(minor_faults() - before < 64);  // filled, n and z would write 32768 pages
    CHECK(ftrl.n_state()[12345] == 0.0f);
    CHECK(ftrl.z_state()[std::size_t(lr.num_params()) - 1] == 0.0f);
  }
  // FM with k = 3 over 1001 features, a third of the parameters zero, the rest not: a few steps
  // of random gradients on random rows, against wide_update_coordinate run on state filled as
  // the formula says (n = 0, z = -w * beta / lr, -0 included).
  const WideShape fm{WideKind::FM, 1001, 1, 3};
  const std::size_t n_params = std::size_t(fm.num_params()), row = std::size_t(fm.row_len());
  std::uint64_t lcg = 12345;
  const auto uniform = [&] { return lcg_uniform(lcg); };
  std::vector<float> params(n_params);
  for (std::size_t i = 0; i < n_params; ++i) params[i] = i % 3 == 0 ? 0.0f : 0.05f * uniform();
  std::vector<float> ref_params = params, ref_n(n_params, 0.0f), ref_z(n_params);
  for (std::size_t i = 0; i < n_params; ++i) ref_z[i] = -params[i] * o.beta / o.lr;
  Optimizer ftrl(o, fm, params);
  kernels::WidePool pool(2);
  std::vector<float> grad(n_params, 0.0f);
  for (int step = 0; step < 7; ++step) {
    std::vector<std::uint32_t> features;
    for (std::uint32_t f = std::uint32_t(step); f < 1001; f += 3 + std::uint32_t(step)) features.push_back(f);
    const float scale = 1.0f / 32.0f;
    std::vector<std::size_t> touched{0};
    for (const std::uint32_t f : features)
      for (std::size_t j = 0; j < row; ++j) touched.push_back(1 + f * row + j);
    for (const std::size_t i : touched) grad[i] = uniform();
    for (const std::size_t i : touched)
      kernels::wide_update_coordinate(o, ref_params[i], grad[i] * scale, &ref_n[i], &ref_z[i]);
    ftrl.step(params.data(), grad.data(), features, scale, pool);
  }
  CHECK(std::memcmp(params.data(), ref_params.data(), n_params * sizeof(float)) == 0);
  CHECK(std::memcmp(ftrl.n_state().data(), ref_n.data(), n_params * sizeof(float)) == 0);
  std::size_t z_differ = 0;  // equal as values: +0 where the formula gives -0
  for (std::size_t i = 0; i < n_params; ++i) z_differ += ftrl.z_state()[i] != ref_z[i];
  CHECK(z_differ == 0);
  CHECK(std::count(grad.begin(), grad.end(), 0.0f) == std::ptrdiff_t(n_params));  // steps zero their gradient
}

TEST_CASE(
    "AdaGrad's state on zero pages: set-up writes one page, steps match eps-filled state bit for bit, eps is saved") {
  OptimizerOptions o;
  o.kind = OptimizerKind::AdaGrad;
  o.lr = 0.05f, o.l2 = 0.01f, o.eps = 1e-6f;
  {
    const WideShape lr{WideKind::LR, std::int64_t(16) << 20, 1, 0};  // 64 MiB of n
    const std::vector<float> zeros(std::size_t(lr.num_params()), 0.0f);
    const long before = minor_faults();
    const Optimizer adagrad(o, lr, zeros);
    CHECK(minor_faults() - before < 64);   // filled with eps, n would write 16384 pages
    CHECK(adagrad.n_state()[0] == o.eps);  // the bias's, which Hogwild's bias copies add to
    CHECK(adagrad.n_state()[12345] == 0.0f);
  }
  // FFM, 3 fields, k = 5, 2003 features: steps of random gradients on overlapping row sets
  // (rows updated once, several times, never), against the textbook rule on n filled with eps.
  const WideShape ffm{WideKind::FFM, 2003, 3, 5};
  const std::size_t n_params = std::size_t(ffm.num_params()), row = std::size_t(ffm.row_len());
  std::uint64_t lcg = 987654321;
  const auto uniform = [&] { return lcg_uniform(lcg); };
  const std::vector<float> start = copy_to_vector(WideModel::create(ffm, 5, 0.1f).params);
  std::vector<float> params = start, ref_params = start, ref_n(n_params, o.eps), grad(n_params, 0.0f);
  Optimizer adagrad(o, ffm, params);
  kernels::WidePool pool(3);
  for (int step = 0; step < 6; ++step) {
    std::vector<std::uint32_t> features;
    for (std::uint32_t f = std::uint32_t(step) * 7; f < 2003; f += 5 + std::uint32_t(step)) features.push_back(f);
    const float scale = 1.0f / 64.0f;
    std::vector<std::size_t> touched{0};
    for (const std::uint32_t f : features)
      for (std::size_t j = 0; j < row; ++j) touched.push_back(1 + f * row + j);
    for (const std::size_t i : touched) grad[i] = uniform();
    for (const std::size_t i : touched) {
      const float g = grad[i] * scale + o.l2 * ref_params[i];
      ref_n[i] += g * g;
      ref_params[i] -= o.lr * g / std::sqrt(ref_n[i]);
    }
    adagrad.step(params.data(), grad.data(), features, scale, pool);
  }
  CHECK(params != start);
  CHECK(std::memcmp(params.data(), ref_params.data(), n_params * sizeof(float)) == 0);
  const std::vector<float> saved = adagrad.saved_n_state();
  REQUIRE(saved.size() == n_params);
  CHECK(std::memcmp(saved.data(), ref_n.data(), n_params * sizeof(float)) == 0);
  // Rows no step touched hold 0 (standing for eps) in the live state.
  CHECK(std::count(adagrad.n_state().begin(), adagrad.n_state().end(), 0.0f) ==
        std::count(ref_n.begin(), ref_n.end(), o.eps));
}
