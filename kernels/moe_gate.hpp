// Gate kernel: row-wise softmax of logits [n, E] and the top-k experts of each row (ties to the
// lower expert id, i.e. a stable descending sort), with their probabilities and the row's
// logsumexp (for the z-loss). `probs` may alias `logits`. The float64 overload is host-only
// (the finite-difference tests); the float one runs on host or device.
#pragma once
#include <cstdint>

#include "lib/core/host_device.hpp"
#include "lib/core/tensor.hpp"

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

namespace cuda {
void softmax_topk(int n, int experts, int k, const float* logits, float* probs, float* lse, std::int32_t* expert,
                  float* weight);
}  // namespace cuda

}  // namespace skew::kernels::moe
