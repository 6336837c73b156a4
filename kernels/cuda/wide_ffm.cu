// FFM gradients on the GPU. The pairwise term <v_{a,field_b}, v_{b,field_a}> x_a x_b does not
// factor into per-feature partial sums, so neither schema re-sorts by feature (as on the CPU):
//  classical: one thread per sample; pairs, logit, and the gradient scattered with global
//  atomics straight into the parameter-sized gradient array.
//  flow: one block per tile of samples, one warp per sample (lanes split the pairs, a shuffle
//  reduction gives the logit). The gradient rows of the hot features (renumbered ids below the
//  cached count: as many rows as fit the shared-memory budget) accumulate in shared memory for
//  the whole tile and reach global memory in one atomic add per weight per tile; cold rows take
//  global atomics directly. FFM rows are long (1 + fields * k floats), so the cache holds one
//  copy, not the replicas the LR/FM kernel keeps.
#include <algorithm>

#include "kernels/cuda/wide_ffm.cuh"
#include "kernels/wide_ffm.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels {

namespace {

constexpr int kThreads = 128;
constexpr int kWarp = 32;
constexpr std::size_t kSharedBudget = 40 * 1024;

// Every gradient write of both kernels: rows in global or shared memory that other threads add to.
struct AtomicAdd {
  __device__ void operator()(float* dst, float v) const { atomicAdd(dst, v); }
};

__global__ void ffm_classical_kernel(int k, int row_len, WideBatch b, const float* params, float* grad, float* logits) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= b.rows) return;
  const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
  float z = params[0];
  for (std::int64_t e = begin; e < end; ++e) z += wide_ffm_entry_logit(b, k, row_len, params, e, end, 0.0f);
  logits[i] = z;
  const float g = 1.0f / (1.0f + expf(-z)) - b.label[i];
  atomicAdd(grad, g);
  for (std::int64_t e = begin; e < end; ++e)
    wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, grad + 1 + std::int64_t(b.index[e]) * row_len,
                           AtomicAdd{});
}

__global__ void ffm_flow_kernel(int k, int row_len, int tile, int hot, WideBatch b, const float* params, float* grad,
                                float* logits) {
  extern __shared__ float cache[];  // hot x row_len gradient rows, then the tile's bias gradient
  const int cache_len = hot * row_len;
  for (int j = threadIdx.x; j <= cache_len; j += blockDim.x) cache[j] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const std::int64_t first = std::int64_t(blockIdx.x) * tile;
  const int samples = int(min(std::int64_t(tile), b.rows - first));
  for (int s = warp; s < samples; s += warps) {
    const std::int64_t i = first + s, begin = b.row_ptr[i], end = b.row_ptr[i + 1];
    float part = 0.0f;
    for (std::int64_t e = begin + lane; e < end; e += kWarp)
      part += wide_ffm_entry_logit(b, k, row_len, params, e, end, 0.0f);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) part += __shfl_xor_sync(0xffffffffu, part, offset);
    const float z = params[0] + part;
    const float g = 1.0f / (1.0f + expf(-z)) - b.label[i];
    if (lane == 0) {
      logits[i] = z;
      atomicAdd(cache + cache_len, g);
    }
    for (std::int64_t e = begin + lane; e < end; e += kWarp) {
      const std::int64_t f = b.index[e];
      float* out = f < hot ? cache + f * row_len : grad + 1 + f * row_len;
      wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, out, AtomicAdd{});
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < cache_len; j += blockDim.x)
    if (cache[j] != 0.0f) atomicAdd(grad + 1 + j, cache[j]);
  if (threadIdx.x == 0) atomicAdd(grad, cache[cache_len]);
}

}  // namespace

void wide_ffm_classical_cuda(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                             float* logits, cudaStream_t stream) {
  if (batch.rows == 0) return;
  ffm_classical_kernel<<<unsigned((batch.rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      shape.k, shape.row_len(), batch, params, grad, logits);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void wide_ffm_flow_cuda(const WideShape& shape, const WideFlowOptions& options, const WideBatch& batch,
                        const float* params, float* grad, float* logits, cudaStream_t stream) {
  if (batch.rows == 0) return;
  const int tile = std::max(1, std::min(options.tile_samples, 64));
  const std::int64_t hot_fit = std::int64_t(kSharedBudget / sizeof(float) - 1) / shape.row_len();
  const int hot = int(std::max<std::int64_t>(0, std::min({options.hot_features, shape.num_features, hot_fit})));
  const std::size_t shared = (std::size_t(hot) * std::size_t(shape.row_len()) + 1) * sizeof(float);
  ffm_flow_kernel<<<unsigned((batch.rows + tile - 1) / tile), kThreads, shared, stream>>>(
      shape.k, shape.row_len(), tile, hot, batch, params, grad, logits);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels
