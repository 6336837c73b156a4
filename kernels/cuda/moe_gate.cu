// CUDA twins of the gate's per-token kernels (kernels/moe_gate.hpp): statistics one block per
// column (experts + 1 of them, each a fixed-order lane sum as the CPU twin's, moe_lane_sum.hpp),
// the rest one assignment, row or element per thread; no launch for an empty range.
#include "kernels/cuda/moe_launch.cuh"
#include "kernels/moe_gate.hpp"
#include "kernels/moe_lane_sum.hpp"

namespace skew::kernels::moe::cuda {
namespace {

// Block j sums column j: its kSumLanes threads are the lanes, the tree runs in shared memory.
__global__ void gate_statistics_kernel(int n, int experts, const float* probs, const float* lse, double* out) {
  __shared__ double partial[kSumLanes];
  const int j = static_cast<int>(blockIdx.x), lane = static_cast<int>(threadIdx.x);
  partial[lane] = gate_statistic_partial(j, lane, kSumLanes, n, experts, probs, lse);
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    lane_tree_level(partial, lane, half);
  }
  if (lane == 0) out[j] = partial[0];
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
  gate_statistics_kernel<<<experts + 1, kSumLanes>>>(n, experts, probs, lse, out);
  SKEW_CUDA_CHECK(cudaGetLastError());
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
