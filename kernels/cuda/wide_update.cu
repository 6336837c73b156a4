// CUDA side of a wide training step after the gradient: flag the rows the batch touched, then
// update the bias and exactly those rows with the rule of kernels/wide_update.hpp (the CPU
// optimiser updates the same rows from its touched list, so both apply the same lazy L2).
#include <algorithm>

#include "kernels/wide_update.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels {

namespace {

constexpr int kThreads = 256;

__global__ void mark_touched_kernel(const std::uint32_t* index, std::int64_t nnz, std::uint8_t* touched) {
  const std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < nnz) touched[index[e]] = 1;  // every writer stores the same value: no atomics needed
}

// One thread per feature; thread 0 also updates the bias, which every step touches.
__global__ void update_kernel(WideUpdateRule rule, int row_len, std::int64_t features, float scale,
                              std::uint8_t* touched, float* params, float* grad, float* n, float* z) {
  const std::int64_t f = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f == 0) {
    wide_update_coordinate(rule, params[0], grad[0] * scale, n, z);
    grad[0] = 0.0f;
  }
  if (f >= features || !touched[f]) return;
  touched[f] = 0;
  for (int j = 0; j < row_len; ++j) {
    const std::int64_t at = 1 + f * row_len + j;
    wide_update_coordinate(rule, params[at], grad[at] * scale, n ? n + at : nullptr, z ? z + at : nullptr);
    grad[at] = 0.0f;
  }
}

}  // namespace

void wide_mark_touched_cuda(const WideBatch& batch, std::int64_t base, std::int64_t nnz, std::uint8_t* touched,
                            void* stream) {
  if (nnz == 0) return;
  mark_touched_kernel<<<unsigned((nnz + kThreads - 1) / kThreads), kThreads, 0, cudaStream_t(stream)>>>(
      batch.index + base, nnz, touched);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void wide_update_cuda(const WideShape& shape, const WideUpdateRule& rule, float scale, std::uint8_t* touched,
                      float* params, float* grad, float* n, float* z, void* stream) {
  const std::int64_t features = std::max<std::int64_t>(1, shape.num_features);
  update_kernel<<<unsigned((features + kThreads - 1) / kThreads), kThreads, 0, cudaStream_t(stream)>>>(
      rule, shape.row_len(), shape.num_features, scale, touched, params, grad, n, z);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels
