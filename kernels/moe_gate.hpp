// Gate kernel: row-wise softmax of logits [n, E] and the top-k experts of each row (ties to the
// lower expert id, i.e. a stable descending sort), with their probabilities and the row's
// logsumexp (for the z-loss). `probs` may alias `logits`. The float64 overload is host-only
// (the finite-difference tests); the float one runs on host or device. Below it, the rest of
// the gate's per-token work (its statistics for the balance and z losses, a replayed trace's
// choices, the logit gradient, the jitter), with the same convention: float on either device,
// double on the host only.
#pragma once
#include <cstdint>

#include "core/host_device.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

void softmax_topk(Device device, int n, int experts, int k, const float* logits, float* probs, float* lse,
                  std::int32_t* expert, float* weight);
void softmax_topk(int n, int experts, int k, const double* logits, double* probs, double* lse, std::int32_t* expert,
                  double* weight);

// The k largest of one row's probabilities `p[0..experts)`, highest first, ties to the lower
// expert id; shared by the CPU loop and the CUDA kernel so both backends pick the same experts.
template <typename T>
SKEW_HD inline void select_topk(const T* p, int experts, int k, std::int32_t* expert, T* weight) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= expert[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;
    }
    expert[j] = best;
    weight[j] = p[best];
  }
}

// Lane `lane`'s share of column j of the gate's per-token statistics (moe_lane_sum.hpp: tokens
// lane, lane + lanes, ... in order, in double): j < experts the probability mass of expert j
// (probs[n, experts]), j == experts the sum of lse^2 (the z-loss).
template <typename T>
SKEW_HD inline double gate_statistic_partial(int j, int lane, int lanes, int n, int experts, const T* probs,
                                             const T* lse) {
  double sum = 0;
  if (j < experts) {
    for (int t = lane; t < n; t += lanes) sum += probs[static_cast<std::int64_t>(t) * experts + j];
  } else {
    for (int t = lane; t < n; t += lanes) sum += static_cast<double>(lse[t]) * lse[t];
  }
  return sum;
}

// A replayed trace's choice for assignment a (token a / k), weighted by its probability.
template <typename T>
SKEW_HD inline void force_choice(std::int64_t a, int k, int experts, const std::int32_t* forced, const T* probs,
                                 std::int32_t* expert, T* weight) {
  expert[a] = forced[a];
  weight[a] = probs[(a / k) * experts + forced[a]];
}

// Token t's logit gradient of the gate: through the softmax from the chosen weights' gradients
// `dweight` plus the balance loss's (aux_coef[e], per expert), and the z-loss's
// (z_coef * lse[t] / tokens).
template <typename T>
SKEW_HD inline void gate_logit_grad_row(int t, int experts, int k, const T* probs, const T* lse,
                                        const std::int32_t* expert, const T* dweight, const double* aux_coef,
                                        double z_coef, double tokens, T* dlogits) {
  const T* p = probs + static_cast<std::int64_t>(t) * experts;
  const std::int32_t* chosen = expert + static_cast<std::int64_t>(t) * k;
  const T* dw = dweight + static_cast<std::int64_t>(t) * k;
  // dp[e], recomputed where needed: the same operations in the same order each time.
  auto dp = [&](int e) {
    double v = aux_coef[e];
    for (int j = 0; j < k; ++j)
      if (chosen[j] == e) v += dw[j];
    return v;
  };
  double dot = 0;
  for (int e = 0; e < experts; ++e) dot += p[e] * dp(e);
  const double dz = z_coef * lse[t] / tokens;
  for (int e = 0; e < experts; ++e)
    dlogits[static_cast<std::int64_t>(t) * experts + e] = static_cast<T>(p[e] * (dp(e) - dot) + dz * p[e]);
}

// x[i] *= factor[i] (the gate's multiplicative jitter, and its backward).
template <typename T>
SKEW_HD inline void scale_element(std::int64_t i, T* x, const T* factor) {
  x[i] *= factor[i];
}

// out[j] = column j's statistic for j = 0..experts (experts + 1 doubles, on `device`), each the
// lane sum of moe_lane_sum.hpp over gate_statistic_partial: one CUDA block per column.
template <typename T>
void gate_statistics(Device device, int n, int experts, const T* probs, const T* lse, double* out);
template <typename T>
void force_choices(Device device, std::int64_t n, int k, int experts, const std::int32_t* forced, const T* probs,
                   std::int32_t* expert, T* weight);
template <typename T>
void gate_logit_grads(Device device, int n, int experts, int k, const T* probs, const T* lse,
                      const std::int32_t* expert, const T* dweight, const double* aux_coef, double z_coef,
                      double tokens, T* dlogits);
template <typename T>
void scale_inplace(Device device, std::int64_t n, T* x, const T* factor);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void gate_statistics(int n, int experts, const float* probs, const float* lse, double* out);
void force_choices(std::int64_t n, int k, int experts, const std::int32_t* forced, const float* probs,
                   std::int32_t* expert, float* weight);
void gate_logit_grads(int n, int experts, int k, const float* probs, const float* lse, const std::int32_t* expert,
                      const float* dweight, const double* aux_coef, double z_coef, double tokens, float* dlogits);
void scale_inplace(std::int64_t n, float* x, const float* factor);
void softmax_topk(int n, int experts, int k, const float* logits, float* probs, float* lse, std::int32_t* expert,
                  float* weight);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
