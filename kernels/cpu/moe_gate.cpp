#include "kernels/moe_gate.hpp"

#include <cmath>
#include <vector>

#include "lib/core/error.hpp"

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
  if (device == Device::Cuda) return cuda::softmax_topk(n, E, k, logits, probs, lse, expert, weight);
  softmax_topk_host(n, E, k, logits, probs, lse, expert, weight);
}

void softmax_topk(int n, int E, int k, const double* logits, double* probs, double* lse, std::int32_t* expert,
                  double* weight) {
  softmax_topk_host(n, E, k, logits, probs, lse, expert, weight);
}

#ifndef SKEW_WITH_CUDA
namespace cuda {
void softmax_topk(int, int, int, const float*, float*, float*, std::int32_t*, float*) {
  SKEW_THROW("moe gate on CUDA in a build without CUDA");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
