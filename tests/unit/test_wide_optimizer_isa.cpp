// The optimizer's sparse step is built for AVX-512, AVX2 and the x86-64 baseline and picks one
// when the program loads (lib/wide/optimizer.cpp); none fuses a multiply into an add, so each
// must give the floats of the rule applied one coordinate at a time (wide_update_coordinate,
// compiled here with the baseline flags): bit for bit, for every rule, whichever version this
// CPU runs. A version with fused multiply-adds fails it (optimizer.cpp built without
// -ffp-contract=off: the AVX-512 version's differ in hundreds of floats).
#include <catch2/catch.hpp>
#include <cstring>

#include "lib/wide/optimizer.hpp"

using namespace skew;
using kernels::WideKind;
using kernels::WideOptimizerKind;

namespace {
// Deterministic values in [-scale, scale) (a 64-bit LCG's top bits).
struct Values {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  float next(float scale) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return scale * (float(state >> 40) / float(1 << 24) * 2.0f - 1.0f);
  }
};
}  // namespace

TEST_CASE("the optimizer's sparse step gives the one-coordinate rule's floats bit for bit on this CPU") {
  const kernels::WideShape shape{WideKind::FFM, 60, 39, 4};  // rows of 157 floats
  const std::size_t row_len = std::size_t(shape.row_len());
  const std::vector<std::uint32_t> features = {3, 17, 42, 8, 59, 0, 31};
  for (const WideOptimizerKind kind : {WideOptimizerKind::Sgd, WideOptimizerKind::AdaGrad, WideOptimizerKind::Ftrl}) {
    INFO("rule " << wide::optimizer_name(kind));
    wide::OptimizerOptions rule;
    rule.kind = kind;
    rule.lr = 0.37f;
    rule.l2 = 0.3f;  // L2 terms as large as the gradient's: a fused multiply-add rounds them differently
    rule.l1 = 1e-4f;
    Values values;
    std::vector<float> params(shape.num_params());
    for (float& p : params) p = values.next(0.5f);
    wide::Optimizer optimizer(rule, shape, params);
    kernels::WideSparseGradient grad;
    grad.parts.resize(2);  // the second with a partial row to fold in
    for (std::size_t p = 0; p < 2; ++p) {
      kernels::WideSparseGradient::Part& part = grad.parts[p];
      part.features.assign(features.begin() + std::ptrdiff_t(p * 4), p == 0 ? features.begin() + 4 : features.end());
      part.rows.resize(part.features.size() * row_len);
      for (float& g : part.rows) g = values.next(2.0f);
      if (p == 1) {
        part.partial_rows.emplace_back(part.rows.size());
        for (float& g : part.partial_rows[0]) g = values.next(2.0f);
      }
    }
    grad.bias = values.next(1.0f);
    const float scale = 0.3f;
    // The expected floats: each coordinate through wide_update_coordinate, on copies of the
    // parameters and of the optimizer's starting state, with the gradient rows folded as the
    // step folds them (rows + partial, in order).
    std::vector<float> want = params;
    std::vector<float> n(params.size()), z(params.size());
    const std::span<const float> n0 = optimizer.n_state(), z0 = optimizer.z_state();
    std::copy(n0.begin(), n0.end(), n.begin());
    std::copy(z0.begin(), z0.end(), z.begin());
    kernels::wide_update_coordinate(rule, want[0], grad.bias * scale, &n[0], &z[0]);
    for (const kernels::WideSparseGradient::Part& part : grad.parts)
      for (std::size_t r = 0; r < part.features.size(); ++r)
        for (std::size_t j = 0; j < row_len; ++j) {
          float g = part.rows[r * row_len + j];
          for (const std::vector<float>& partial : part.partial_rows) g += partial[r * row_len + j];
          const std::size_t at = 1 + part.features[r] * row_len + j;
          kernels::wide_update_coordinate(rule, want[at], g * scale, &n[at], &z[at]);
        }
    const std::vector<float> start = params;
    kernels::WidePool pool(2);
    optimizer.step(params.data(), grad, scale, pool);
    CHECK(std::memcmp(params.data(), want.data(), params.size() * sizeof(float)) == 0);
    CHECK(params != start);
    for (const kernels::WideSparseGradient::Part& part : grad.parts)
      for (const float g : part.rows) REQUIRE(g == 0.0f);  // and zeroed the gradient
  }
}
