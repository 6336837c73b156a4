// The gate's per-token kernels (kernels/moe_gate.hpp) in float against the same kernels in
// float64 on the same inputs, and against sums and the closed-form softmax gradient written here:
// the balance and z-loss statistics, a replayed trace's choices, the logit gradient, the jitter.
// (The float64 gate's backward is checked against finite differences in test_moe_ops.cpp; the
// CUDA twins in tests/cuda/test_moe_layer_cuda.cpp.)
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_gate.hpp"

using namespace skew;
namespace km = skew::kernels::moe;

namespace {

constexpr int kTokens = 23, kExperts = 7, kTopK = 3;

struct GateInputs {
  std::vector<double> probs, lse, dweight, aux_coef;
  std::vector<std::int32_t> expert;
};

// Softmax rows of random logits, their logsumexp, k distinct experts per token.
GateInputs random_gate() {
  Rng rng(37, 2);
  GateInputs g;
  for (int t = 0; t < kTokens; ++t) {
    std::vector<double> logit(kExperts);
    double z = 0;
    for (auto& l : logit) l = 3.0 * rng.normal(), z += std::exp(l);
    for (double l : logit) g.probs.push_back(std::exp(l) / z);
    g.lse.push_back(std::log(z));
    const auto first = static_cast<std::int32_t>(rng.below(kExperts));
    for (int j = 0; j < kTopK; ++j) g.expert.push_back((first + 2 * j) % kExperts);
    for (int j = 0; j < kTopK; ++j) g.dweight.push_back(rng.normal());
  }
  for (int e = 0; e < kExperts; ++e) g.aux_coef.push_back(0.05 * rng.uniform());
  return g;
}

std::vector<float> narrow(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("gate statistics sum each expert's probability and lse^2 over tokens", "[moe][gate]") {
  const GateInputs g = random_gate();
  std::vector<double> got(kExperts + 1);
  km::gate_statistics<float>(Device::Host, kTokens, kExperts, narrow(g.probs).data(), narrow(g.lse).data(), got.data());
  for (int j = 0; j <= kExperts; ++j) {
    double want = 0;
    for (int t = 0; t < kTokens; ++t)
      want += j < kExperts ? g.probs[t * kExperts + j]
                           : g.lse[static_cast<std::size_t>(t)] * g.lse[static_cast<std::size_t>(t)];
    CHECK(got[static_cast<std::size_t>(j)] == Approx(want).epsilon(1e-6));
  }
}

TEST_CASE("replayed choices take the trace's experts and their probabilities", "[moe][gate]") {
  const GateInputs g = random_gate();
  const std::vector<float> probs = narrow(g.probs);
  std::vector<std::int32_t> expert(g.expert.size(), -1);
  std::vector<float> weight(g.expert.size(), -1.0f);
  km::force_choices<float>(Device::Host, static_cast<std::int64_t>(g.expert.size()), kTopK, kExperts, g.expert.data(),
                           probs.data(), expert.data(), weight.data());
  CHECK(expert == g.expert);
  for (std::size_t a = 0; a < expert.size(); ++a)
    CHECK(weight[a] == probs[a / kTopK * kExperts + static_cast<std::size_t>(g.expert[a])]);
}

TEST_CASE("gate logit gradient: float equals float64 and the softmax closed form", "[moe][gate]") {
  const GateInputs g = random_gate();
  const double z_coef = 0.02, tokens = 57;
  std::vector<double> want(g.probs.size()), got64(g.probs.size());
  std::vector<float> got32(g.probs.size());
  km::gate_logit_grads<double>(Device::Host, kTokens, kExperts, kTopK, g.probs.data(), g.lse.data(), g.expert.data(),
                               g.dweight.data(), g.aux_coef.data(), z_coef, tokens, got64.data());
  km::gate_logit_grads<float>(Device::Host, kTokens, kExperts, kTopK, narrow(g.probs).data(), narrow(g.lse).data(),
                              g.expert.data(), narrow(g.dweight).data(), g.aux_coef.data(), z_coef, tokens,
                              got32.data());
  // dL/dlogit_e = p_e (dp_e - sum_f p_f dp_f) + z_coef lse / tokens p_e, dp_e = aux_coef_e + the
  // gradients of the weights that chose e.
  for (int t = 0; t < kTokens; ++t) {
    std::vector<double> dp(g.aux_coef);
    for (int j = 0; j < kTopK; ++j)
      dp[static_cast<std::size_t>(g.expert[t * kTopK + j])] += g.dweight[static_cast<std::size_t>(t * kTopK + j)];
    double mean = 0;
    for (int e = 0; e < kExperts; ++e) mean += g.probs[t * kExperts + e] * dp[static_cast<std::size_t>(e)];
    for (int e = 0; e < kExperts; ++e) {
      const double p = g.probs[t * kExperts + e];
      const std::size_t at = static_cast<std::size_t>(t * kExperts + e);
      want[at] =
          p * (dp[static_cast<std::size_t>(e)] - mean) + z_coef * g.lse[static_cast<std::size_t>(t)] / tokens * p;
      CHECK(got64[at] == Approx(want[at]).epsilon(1e-12).margin(1e-15));
      CHECK(got32[at] == Approx(want[at]).epsilon(1e-5).margin(1e-7));
    }
  }
}

TEST_CASE("jitter scales elementwise", "[moe][gate]") {
  const GateInputs g = random_gate();
  std::vector<float> x = narrow(g.probs), factor = narrow(g.dweight);
  factor.resize(x.size(), 1.5f);
  const std::vector<float> before = x;
  km::scale_inplace<float>(Device::Host, static_cast<std::int64_t>(x.size()), x.data(), factor.data());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == before[i] * factor[i]);
}
