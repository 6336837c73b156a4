// CUDA twins of kernels/moe_elementwise.hpp: one element per thread (grid-stride), running the
// same SKEW_HD bodies as the CPU loops; the bias-gradient column sum in two levels (partials of
// row chunks in a grow-only scratch, then one ordered pass over them, as layernorm's dg/db).
#include <algorithm>

#include "core/cuda_check.hpp"
#include "kernels/cuda/scratch.hpp"
#include "kernels/moe_elementwise.hpp"

namespace skew::kernels::moe::cuda {
namespace {

constexpr int kBlock = 256;

int grid_for(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>((n + kBlock - 1) / kBlock, std::size_t(1) << 16));
}

#define SKEW_FOR_EACH_ELEMENT(i, n)                                                 \
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += std::size_t(gridDim.x) * blockDim.x)

__global__ void broadcast_row_kernel(std::size_t n, std::size_t cols, const float* row, float* y) {
  SKEW_FOR_EACH_ELEMENT(at, n) broadcast_row_element(at, cols, row, y);
}

__global__ void add_kernel(std::size_t n, float* x, const float* y) {
  SKEW_FOR_EACH_ELEMENT(i, n) add_element(i, x, y);
}

// Partials [chunk, cols]: block (x: columns, y: row chunks); a warp reads adjacent columns of a
// row, so the loads coalesce.
__global__ void column_partial_kernel(std::size_t rows, std::size_t cols, std::size_t chunk_rows, const float* m,
                                      float* partial) {
  const std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const std::size_t begin = std::size_t(blockIdx.y) * chunk_rows, end = std::min(rows, begin + chunk_rows);
  float* out = partial + std::size_t(blockIdx.y) * cols + j;
  *out = 0;
  kernels::moe::column_sum_add(begin, end, cols, j, m, out);  // the body, not this namespace's wrapper
}

__global__ void column_partials_sum_kernel(std::size_t chunks, std::size_t cols, const float* partial, float* sum) {
  SKEW_FOR_EACH_ELEMENT(j, cols) kernels::moe::column_sum_add(0, chunks, cols, j, partial, sum + j);
}

__global__ void gelu_forward_kernel(std::size_t n, const float* x, float* y) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = gelu_forward_element(x[i]);
}

__global__ void gelu_backward_kernel(std::size_t n, const float* x, const float* dy, float* dx) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    dx[i] = gelu_backward_element(x[i], dy[i]);
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, std::size_t n, float weight_decay,
                             AdamWStep k) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    adamw_element(w[i], g[i], m[i], v[i], k, weight_decay);
}

}  // namespace

void broadcast_row(std::size_t rows, std::size_t cols, const float* row, float* y) {
  if (rows * cols == 0) return;
  broadcast_row_kernel<<<grid_for(rows * cols), kBlock>>>(rows * cols, cols, row, y);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void add_inplace(std::size_t n, float* x, const float* y) {
  if (n == 0) return;
  add_kernel<<<grid_for(n), kBlock>>>(n, x, y);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void column_sum_add(std::size_t rows, std::size_t cols, const float* m, float* sum) {
  if (rows == 0 || cols == 0) return;
  // 64 rows a chunk fills the GPU from a few thousand rows on; more when the grid's y limit
  // (65535) would be passed.
  constexpr std::size_t kMaxChunks = 65535;
  const std::size_t chunk_rows = std::max<std::size_t>(64, (rows + kMaxChunks - 1) / kMaxChunks);
  const std::size_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  float* partial = static_cast<float*>(scratch_slices(scratch, {chunks * cols * sizeof(float)})[0]);
  const dim3 grid(static_cast<unsigned>((cols + kBlock - 1) / kBlock), static_cast<unsigned>(chunks));
  column_partial_kernel<<<grid, kBlock>>>(rows, cols, chunk_rows, m, partial);
  SKEW_CUDA_CHECK(cudaGetLastError());
  column_partials_sum_kernel<<<grid_for(cols), kBlock>>>(chunks, cols, partial, sum);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

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
