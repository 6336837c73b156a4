#include "kernels/moe_gate.hpp"

#include <cmath>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/moe_lane_sum.hpp"

namespace skew::kernels::moe {

namespace {
template <class T>
void softmax_topk_host(int n, int E, int k, const T* logits, T* probs, T* lse, std::int32_t* expert, T* weight) {
  SKEW_CHECK(k >= 1 && k <= E, "softmax_topk: k " << k << " outside [1, " << E << "]");
  for (int t = 0; t < n; ++t) {
    const T* l = logits + static_cast<std::size_t>(t) * E;
    T* p = probs + static_cast<std::size_t>(t) * E;
    double mx = l[0];
    for (int e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(l[e]));
    double z = 0;
    for (int e = 0; e < E; ++e) z += std::exp(l[e] - mx);
    const double s = mx + std::log(z);
    lse[t] = static_cast<T>(s);
    for (int e = 0; e < E; ++e) p[e] = static_cast<T>(std::exp(l[e] - s));
    select_topk(p, E, k, expert + static_cast<std::size_t>(t) * k, weight + static_cast<std::size_t>(t) * k);
  }
}
}  // namespace

void softmax_topk(Device device, int n, int E, int k, const float* logits, float* probs, float* lse,
                  std::int32_t* expert, float* weight) {
  SKEW_ON_CUDA(device, "moe gate", cuda::softmax_topk(n, E, k, logits, probs, lse, expert, weight));
  softmax_topk_host(n, E, k, logits, probs, lse, expert, weight);
}

void softmax_topk(int n, int E, int k, const double* logits, double* probs, double* lse, std::int32_t* expert,
                  double* weight) {
  softmax_topk_host(n, E, k, logits, probs, lse, expert, weight);
}

template <typename T>
void gate_statistics(Device device, int n, int experts, const T* probs, const T* lse, double* out) {
  SKEW_ON_CUDA_FLOAT(T, device, "gate statistics", cuda::gate_statistics(n, experts, probs, lse, out));
  for (int j = 0; j <= experts; ++j)
    out[j] =
        lane_sum_host([&](int lane) { return gate_statistic_partial(j, lane, kSumLanes, n, experts, probs, lse); });
}

template <typename T>
void force_choices(Device device, std::int64_t n, int k, int experts, const std::int32_t* forced, const T* probs,
                   std::int32_t* expert, T* weight) {
  SKEW_ON_CUDA_FLOAT(T, device, "replayed gate choices",
                     cuda::force_choices(n, k, experts, forced, probs, expert, weight));
  for (std::int64_t a = 0; a < n; ++a) force_choice(a, k, experts, forced, probs, expert, weight);
}

template <typename T>
void gate_logit_grads(Device device, int n, int experts, int k, const T* probs, const T* lse,
                      const std::int32_t* expert, const T* dweight, const double* aux_coef, double z_coef,
                      double tokens, T* dlogits) {
  SKEW_ON_CUDA_FLOAT(
      T, device, "gate backward",
      cuda::gate_logit_grads(n, experts, k, probs, lse, expert, dweight, aux_coef, z_coef, tokens, dlogits));
  for (int t = 0; t < n; ++t)
    gate_logit_grad_row(t, experts, k, probs, lse, expert, dweight, aux_coef, z_coef, tokens, dlogits);
}

template <typename T>
void scale_inplace(Device device, std::int64_t n, T* x, const T* factor) {
  SKEW_ON_CUDA_FLOAT(T, device, "gate jitter", cuda::scale_inplace(n, x, factor));
  for (std::int64_t i = 0; i < n; ++i) scale_element(i, x, factor);
}

#define SKEW_GATE_KERNELS(T)                                                                                        \
  template void gate_statistics<T>(Device, int, int, const T*, const T*, double*);                                  \
  template void force_choices<T>(Device, std::int64_t, int, int, const std::int32_t*, const T*, std::int32_t*, T*); \
  template void gate_logit_grads<T>(Device, int, int, int, const T*, const T*, const std::int32_t*, const T*,       \
                                    const double*, double, double, T*);                                             \
  template void scale_inplace<T>(Device, std::int64_t, T*, const T*);
SKEW_GATE_KERNELS(float)
SKEW_GATE_KERNELS(double)

}  // namespace skew::kernels::moe
