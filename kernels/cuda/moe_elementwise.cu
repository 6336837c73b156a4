// CUDA twins of kernels/moe_elementwise.hpp: one element per thread (grid-stride), running the
// same SKEW_HD bodies as the CPU loops.
#include <algorithm>

#include "kernels/moe_elementwise.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels::moe::cuda {
namespace {

constexpr int kBlock = 256;

int grid_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + kBlock - 1) / kBlock, std::size_t(1) << 16));
}

__global__ void gelu_forward_kernel(std::size_t n, const float* x, float* y) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = gelu_forward_element(x[i]);
}

__global__ void gelu_backward_kernel(std::size_t n, const float* x, const float* dy, float* dx) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    dx[i] = gelu_backward_element(x[i], dy[i]);
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, std::size_t n, float weight_decay,
                             AdamWStep k) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    adamw_element(w[i], g[i], m[i], v[i], k, weight_decay);
}

}  // namespace

void gelu_forward(std::size_t n, const float* x, float* y) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kBlock>>>(n, x, y);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void gelu_backward(std::size_t n, const float* x, const float* dy, float* dx) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kBlock>>>(n, x, dy, dx);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void adamw_update(float* w, const float* g, float* m, float* v, std::size_t count, bool decay, const AdamWStep& k) {
  if (count == 0) return;
  adamw_kernel<<<grid_for(count), kBlock>>>(w, g, m, v, count, decay ? k.decay : 0.0f, k);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels::moe::cuda
