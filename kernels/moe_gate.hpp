// Gate kernel: row-wise softmax of logits [n, E] and the top-k experts of each row (ties to the
// lower expert id, i.e. a stable descending sort), with their probabilities and the row's
// logsumexp (for the z-loss). `probs` may alias `logits`. The float64 overload is host-only
// (the finite-difference tests); the float one runs on host or device.
#pragma once
#include <cstdint>

#include "lib/core/tensor.hpp"

namespace skew::kernels::moe {

void softmax_topk(Device device, int n, int experts, int k, const float* logits, float* probs, float* lse,
                  std::int32_t* expert, float* weight);
void softmax_topk(int n, int experts, int k, const double* logits, double* probs, double* lse, std::int32_t* expert,
                  double* weight);

namespace cuda {
void softmax_topk(int n, int experts, int k, const float* logits, float* probs, float* lse, std::int32_t* expert,
                  float* weight);
}  // namespace cuda

}  // namespace skew::kernels::moe
