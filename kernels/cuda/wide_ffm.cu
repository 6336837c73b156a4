// FFM gradients on the GPU. The pairwise term <v_{a,field_b}, v_{b,field_a}> x_a x_b does not
// factor into per-feature partial sums, so neither schema re-sorts by feature (as on the CPU):
//  classical: one thread per sample; pairs, logit, and the gradient scattered with global
//  atomics straight into the parameter-sized gradient array (the bias summed per block first).
//  flow: one block per tile of samples, one warp per sample. A sample's n linear terms and
//  n(n-1)/2 pairs are numbered as one list (kernels/wide_tile.hpp: wide_pair_of) and the lanes
//  stride over it, so each lane gets the same share of pairs; a shuffle reduction gives the
//  logit, and the same list spreads the gradient. The gradient rows of the hot features
//  (renumbered ids below the cached count: as many rows as fit the shared-memory budget)
//  accumulate in shared memory for the whole tile and reach global memory in one atomic add per
//  weight per tile; only the rows the tile uses are zeroed and flushed (a bitmap of them, set in
//  a first pass over the tile's entries). Cold rows take global atomics directly.
#include <algorithm>

#include "core/cuda_check.hpp"
#include "kernels/cuda/wide_block.cuh"
#include "kernels/cuda/wide_ffm.cuh"
#include "kernels/wide_ffm.hpp"
#include "kernels/wide_tile.hpp"

namespace skew::kernels {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxTile = 64;  // larger tiles flush hot rows less often, but leave SMs idle on a 16k batch
constexpr std::size_t kSharedBudget = 40 * 1024;

// Every gradient write of both kernels: rows in global or shared memory that other threads add to.
struct AtomicAdd {
  __device__ void operator()(float* dst, float v) const { atomicAdd(dst, v); }
};

__global__ void ffm_classical_kernel(int k, int row_len, WideBatch b, const float* params, float* grad, float* logits) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float g = 0.0f;  // threads past the batch add nothing to the bias but join its block sum
  if (i < b.rows) {
    const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
    float z = params[0];
    for (std::int64_t e = begin; e < end; ++e) z += wide_ffm_entry_logit(b, k, row_len, params, e, end, 0.0f);
    logits[i] = z;
    g = 1.0f / (1.0f + expf(-z)) - b.label[i];
    for (std::int64_t e = begin; e < end; ++e)
      wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, grad + 1 + std::int64_t(b.index[e]) * row_len,
                             AtomicAdd{});
  }
  wide_block_sum_to(g, grad);
}

__device__ inline bool is_set(const std::uint32_t* bits, std::int64_t i) {
  return (bits[i / 32] >> (i % 32)) & 1u;
}

// Shared memory: hot x row_len gradient rows, then one bit per hot row (set: the tile uses it).
__global__ void ffm_flow_kernel(int k, int row_len, int tile, int hot, WideBatch b, const float* params, float* grad,
                                float* logits) {
  extern __shared__ float cache[];
  std::uint32_t* used = reinterpret_cast<std::uint32_t*>(cache + std::int64_t(hot) * row_len);
  const int words = (hot + 31) / 32;
  const std::int64_t cache_len = std::int64_t(hot) * row_len;
  const std::int64_t first = std::int64_t(blockIdx.x) * tile;
  const int samples = int(min(std::int64_t(tile), b.rows - first));
  const std::int64_t tile_begin = b.row_ptr[first], tile_end = b.row_ptr[first + samples];
  for (int w = threadIdx.x; w < words; w += blockDim.x) used[w] = 0u;
  __syncthreads();
  for (std::int64_t e = tile_begin + threadIdx.x; e < tile_end; e += blockDim.x)
    if (b.index[e] < std::uint32_t(hot)) atomicOr(used + b.index[e] / 32, 1u << (b.index[e] % 32));
  __syncthreads();
  for (std::int64_t j = threadIdx.x; j < cache_len; j += blockDim.x)
    if (is_set(used, j / row_len)) cache[j] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % kWideWarp, warp = threadIdx.x / kWideWarp, warps = blockDim.x / kWideWarp;
  const auto row_of = [&](std::int64_t e) {
    const std::int64_t f = b.index[e];
    return f < hot ? cache + f * row_len : grad + 1 + f * row_len;
  };
  float bias = 0.0f;
  for (int s = warp; s < samples; s += warps) {
    const std::int64_t i = first + s, begin = b.row_ptr[i], n = b.row_ptr[i + 1] - begin;
    // Work item t < n: entry t's linear term; t >= n: pair t - n (wide_pair_of).
    const std::int64_t items = n + wide_pair_count(n);
    float part = 0.0f;
    for (std::int64_t t = lane; t < items; t += kWideWarp) {
      if (t < n) {
        part += params[1 + std::int64_t(b.index[begin + t]) * row_len] * b.value[begin + t];
      } else {
        const WidePair p = wide_pair_of(t - n, n);
        part += wide_ffm_pair_logit(b, k, row_len, params, begin + p.a, begin + p.b);
      }
    }
    for (int offset = kWideWarp / 2; offset > 0; offset /= 2) part += __shfl_xor_sync(0xffffffffu, part, offset);
    const float z = params[0] + part;
    const float g = 1.0f / (1.0f + expf(-z)) - b.label[i];
    if (lane == 0) {
      logits[i] = z;
      bias += g;
    }
    for (std::int64_t t = lane; t < items; t += kWideWarp) {
      if (t < n) {
        atomicAdd(row_of(begin + t), g * b.value[begin + t]);
      } else {
        const WidePair p = wide_pair_of(t - n, n);
        const std::int64_t a = begin + p.a, o = begin + p.b;
        wide_ffm_pair_scatter(b, k, row_len, params, a, o, g, row_of(a), AtomicAdd{});
        wide_ffm_pair_scatter(b, k, row_len, params, o, a, g, row_of(o), AtomicAdd{});
      }
    }
  }
  wide_block_sum_to(bias, grad);
  __syncthreads();  // every hot row complete
  for (std::int64_t j = threadIdx.x; j < cache_len; j += blockDim.x)
    if (is_set(used, j / row_len)) atomicAdd(grad + 1 + j, cache[j]);
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
  const int tile = wide_cuda_tile(options, kMaxTile, "FFM");
  // A hot row costs row_len floats and one bit; the bitmap's words round up.
  const std::int64_t hot_fit = std::int64_t((kSharedBudget - sizeof(std::uint32_t)) * 8 /
                                            (8 * sizeof(float) * std::size_t(shape.row_len()) + 1));
  const int hot = wide_cuda_hot(shape, options, hot_fit, kSharedBudget, "FFM");
  const std::size_t shared = std::size_t(hot) * std::size_t(shape.row_len()) * sizeof(float) +
                             std::size_t((hot + 31) / 32) * sizeof(std::uint32_t);
  ffm_flow_kernel<<<unsigned((batch.rows + tile - 1) / tile), kThreads, shared, stream>>>(
      shape.k, shape.row_len(), tile, hot, batch, params, grad, logits);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels
