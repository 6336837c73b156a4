// CUDA twins of the gate's per-token kernels (kernels/moe_gate.hpp): statistics one thread per
// column (experts + 1 of them, each summing its column in token order as the CPU twin does),
// the rest one assignment, row or element per thread; no launch for an empty range.
#include "kernels/cuda/moe_launch.cuh"
#include "kernels/moe_gate.hpp"

namespace skew::kernels::moe::cuda {
namespace {

__global__ void gate_statistics_kernel(std::int64_t columns, int n, int experts, const float* probs, const float* lse,
                                       double* out) {
  SKEW_FOR_EACH_INDEX(j, columns) out[j] = gate_statistic(static_cast<int>(j), n, experts, probs, lse);
}

__global__ void force_choices_kernel(std::int64_t n, int k, int experts, const std::int32_t* forced, const float* probs,
                                     std::int32_t* expert, float* weight) {
  SKEW_FOR_EACH_INDEX(a, n) force_choice(a, k, experts, forced, probs, expert, weight);
}

__global__ void gate_logit_grads_kernel(std::int64_t n, int experts, int k, const float* probs, const float* lse,
                                        const std::int32_t* expert, const float* dweight, const double* aux_coef,
                                        double z_coef, double tokens, float* dlogits) {
  SKEW_FOR_EACH_INDEX(t, n)
  gate_logit_grad_row(static_cast<int>(t), experts, k, probs, lse, expert, dweight, aux_coef, z_coef, tokens, dlogits);
}

__global__ void scale_kernel(std::int64_t n, float* x, const float* factor) {
  SKEW_FOR_EACH_INDEX(i, n) scale_element(i, x, factor);
}

}  // namespace

void gate_statistics(int n, int experts, const float* probs, const float* lse, double* out) {
  launch_over(gate_statistics_kernel, std::int64_t(experts) + 1, n, experts, probs, lse, out);
}
void force_choices(std::int64_t n, int k, int experts, const std::int32_t* forced, const float* probs,
                   std::int32_t* expert, float* weight) {
  launch_over(force_choices_kernel, n, k, experts, forced, probs, expert, weight);
}
void gate_logit_grads(int n, int experts, int k, const float* probs, const float* lse, const std::int32_t* expert,
                      const float* dweight, const double* aux_coef, double z_coef, double tokens, float* dlogits) {
  launch_over(gate_logit_grads_kernel, n, experts, k, probs, lse, expert, dweight, aux_coef, z_coef, tokens, dlogits);
}
void scale_inplace(std::int64_t n, float* x, const float* factor) {
  launch_over(scale_kernel, n, x, factor);
}

}  // namespace skew::kernels::moe::cuda
