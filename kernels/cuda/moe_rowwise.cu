// CUDA twins of kernels/moe_rowwise.hpp, running the same SKEW_HD bodies: one warp per row
// (lanes = 32, warp-shuffle reductions) for layernorm, attention softmax and cross-entropy; one
// thread per element for the embedding (its backward adds with atomics: tokens repeat); the
// column reductions (layernorm dg/db, sum of squares) in two levels, chunk partials in a
// grow-only scratch (kernels/cuda/scratch.hpp), then one ordered pass over the partials. The row
// bodies' fp64 sums are shuffled as doubles; H200's fp64 rate is far above what these
// memory-bound kernels need.
#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "kernels/cuda/scratch.hpp"
#include "kernels/moe_rowwise.hpp"

namespace skew::kernels::moe::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kBlock / kWarp;
constexpr unsigned kMaxGrid = 1u << 16;  // grid-stride loops cover the rest
// Rows per partial of the layernorm dg/db reduction: enough chunks to fill the GPU at 8192 rows.
constexpr std::size_t kParamChunkRows = 64;
constexpr std::size_t kMaxGridY = 65535;

unsigned grid_for(std::size_t items, std::size_t per_block) {
  return static_cast<unsigned>(std::min<std::size_t>((items + per_block - 1) / per_block, kMaxGrid));
}

// Grid-stride over rows, one warp each; every lane of a warp sees the same row, so the
// shuffles inside the row bodies always have the full warp.
#define SKEW_FOR_EACH_WARP_ROW(row, rows)                                                             \
  for (std::size_t row = std::size_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp; row < (rows); \
       row += std::size_t(gridDim.x) * kRowsPerBlock)
#define SKEW_FOR_EACH_THREAD(i, count)                                                  \
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += std::size_t(gridDim.x) * blockDim.x)

__global__ void layernorm_forward_kernel(std::size_t n, int d, const float* x, const float* g, const float* b, float* y,
                                         float* mean, float* rstd) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  SKEW_FOR_EACH_WARP_ROW(i, n) {
    layernorm_forward_row(d, x + i * d, g, b, y + i * d, mean + i, rstd + i, lane, kWarp, LaneReduce{});
  }
}

__global__ void layernorm_backward_kernel(std::size_t n, int d, const float* x, const float* g, const float* mean,
                                          const float* rstd, const float* dy, float* dx) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  SKEW_FOR_EACH_WARP_ROW(i, n) {
    layernorm_backward_row(d, x + i * d, g, mean[i], rstd[i], dy + i * d, dx + i * d, lane, kWarp, LaneReduce{});
  }
}

// Partials [chunk, d] of dg and db: block (x: columns, y: row chunks); threads of a warp read
// adjacent columns of a row, so the loads coalesce.
__global__ void layernorm_param_partial_kernel(std::size_t n, int d, std::size_t chunk_rows, const float* x,
                                               const float* mean, const float* rstd, const float* dy, float* dg_part,
                                               float* db_part) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= d) return;
  const std::size_t chunk = blockIdx.y, begin = chunk * chunk_rows, end = std::min(n, begin + chunk_rows);
  float* dg = dg_part + chunk * d + j;
  float* db = db_part + chunk * d + j;
  *dg = 0, *db = 0;
  layernorm_param_grad_column(begin, end, d, j, x, mean, rstd, dy, dg, db);
}

__global__ void layernorm_param_sum_kernel(std::size_t chunks, int d, const float* dg_part, const float* db_part,
                                           float* dg, float* db) {
  SKEW_FOR_EACH_THREAD(j, static_cast<std::size_t>(d)) {
    float sum_g = 0, sum_b = 0;
    for (std::size_t c = 0; c < chunks; ++c) sum_g += dg_part[c * d + j], sum_b += db_part[c * d + j];
    dg[j] += sum_g;
    db[j] += sum_b;
  }
}

__global__ void embedding_forward_kernel(std::size_t count, int d, int seq, const std::int32_t* tokens,
                                         const float* wte, const float* wpe, float* out) {
  SKEW_FOR_EACH_THREAD(at, count) {
    const EmbeddingIndex index = embedding_index(at, d, seq, tokens);
    out[at] = wte[index.token] + wpe[index.position];
  }
}

__global__ void embedding_backward_kernel(std::size_t count, int d, int seq, const std::int32_t* tokens,
                                          const float* dout, float* dwte, float* dwpe) {
  SKEW_FOR_EACH_THREAD(at, count) {
    const EmbeddingIndex index = embedding_index(at, d, seq, tokens);
    atomicAdd(dwte + index.token, dout[at]);
    atomicAdd(dwpe + index.position, dout[at]);
  }
}

__global__ void attention_softmax_forward_kernel(std::size_t rows, int seq, bool causal, float* scores) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  SKEW_FOR_EACH_WARP_ROW(r, rows) {
    softmax_forward_row(seq, attention_row_valid(r, seq, causal), scores + r * seq, lane, kWarp, LaneReduce{});
  }
}

__global__ void attention_softmax_backward_kernel(std::size_t rows, int seq, bool causal, const float* probs,
                                                  float* grad, float scale) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  SKEW_FOR_EACH_WARP_ROW(r, rows) {
    softmax_backward_row(seq, attention_row_valid(r, seq, causal), probs + r * seq, grad + r * seq, scale, lane, kWarp,
                         LaneReduce{});
  }
}

__global__ void cross_entropy_kernel(std::size_t n, int v, const float* logits, const std::int32_t* targets,
                                     float scale, float* dlogits, double* row_loss) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  SKEW_FOR_EACH_WARP_ROW(i, n) {
    const double loss =
        cross_entropy_row(v, logits + i * v, targets[i], scale, dlogits + i * v, lane, kWarp, LaneReduce{});
    if (lane == 0) row_loss[i] = loss;
  }
}

// First level: one block per chunk of kSquaresChunk elements, its kBlock lanes' fp64 partials
// summed through shared memory.
__global__ void sum_squares_partial_kernel(std::size_t n, std::size_t chunks, const float* x, double* partial) {
  __shared__ double lanes[kBlock];
  for (std::size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const std::size_t begin = chunk * kSquaresChunk, end = std::min(n, begin + kSquaresChunk);
    lanes[threadIdx.x] = sum_squares_lane(x, begin, end, static_cast<int>(threadIdx.x), kBlock);
    __syncthreads();
    for (int half = kBlock / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) lanes[threadIdx.x] += lanes[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[chunk] = lanes[0];
    __syncthreads();  // lanes[0] is read before the next chunk overwrites it
  }
}

// Second level: one block sums the chunk partials.
__global__ void sum_partials_kernel(std::size_t chunks, const double* partial, double* total) {
  __shared__ double lanes[kBlock];
  double sum = 0;
  for (std::size_t c = threadIdx.x; c < chunks; c += kBlock) sum += partial[c];
  lanes[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) lanes[threadIdx.x] += lanes[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *total = lanes[0];
}

#undef SKEW_FOR_EACH_WARP_ROW
#undef SKEW_FOR_EACH_THREAD

void check_launch() {
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void layernorm_forward(int n, int d, const float* x, const float* g, const float* b, float* y, float* mean,
                       float* rstd) {
  if (n <= 0 || d <= 0) return;
  layernorm_forward_kernel<<<grid_for(n, kRowsPerBlock), kBlock>>>(n, d, x, g, b, y, mean, rstd);
  check_launch();
}

void layernorm_backward(int n, int d, const float* x, const float* g, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dg, float* db) {
  if (n <= 0 || d <= 0) return;
  layernorm_backward_kernel<<<grid_for(n, kRowsPerBlock), kBlock>>>(n, d, x, g, mean, rstd, dy, dx);
  check_launch();
  // Chunks of rows for the partials, at most kMaxGridY of them (the grid's y limit).
  const std::size_t rows = static_cast<std::size_t>(n);
  const std::size_t chunk_rows = std::max(kParamChunkRows, (rows + kMaxGridY - 1) / kMaxGridY);
  const std::size_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  const std::size_t part_bytes = chunks * static_cast<std::size_t>(d) * sizeof(float);
  const auto slices = scratch_slices(scratch, {part_bytes, part_bytes});
  float* dg_part = static_cast<float*>(slices[0]);
  float* db_part = static_cast<float*>(slices[1]);
  const dim3 grid(static_cast<unsigned>((d + kBlock - 1) / kBlock), static_cast<unsigned>(chunks));
  layernorm_param_partial_kernel<<<grid, kBlock>>>(rows, d, chunk_rows, x, mean, rstd, dy, dg_part, db_part);
  check_launch();
  layernorm_param_sum_kernel<<<grid_for(d, kBlock), kBlock>>>(chunks, d, dg_part, db_part, dg, db);
  check_launch();
}

void embedding_forward(int n, int d, int seq, const std::int32_t* tokens, const float* wte, const float* wpe,
                       float* out) {
  const std::size_t count = static_cast<std::size_t>(std::max(n, 0)) * static_cast<std::size_t>(std::max(d, 0));
  if (count == 0) return;
  embedding_forward_kernel<<<grid_for(count, kBlock), kBlock>>>(count, d, seq, tokens, wte, wpe, out);
  check_launch();
}

void embedding_backward(int n, int d, int seq, const std::int32_t* tokens, const float* dout, float* dwte,
                        float* dwpe) {
  const std::size_t count = static_cast<std::size_t>(std::max(n, 0)) * static_cast<std::size_t>(std::max(d, 0));
  if (count == 0) return;
  embedding_backward_kernel<<<grid_for(count, kBlock), kBlock>>>(count, d, seq, tokens, dout, dwte, dwpe);
  check_launch();
}

void attention_softmax_forward(std::size_t rows, int seq, bool causal, float* scores) {
  if (rows == 0 || seq <= 0) return;
  attention_softmax_forward_kernel<<<grid_for(rows, kRowsPerBlock), kBlock>>>(rows, seq, causal, scores);
  check_launch();
}

void attention_softmax_backward(std::size_t rows, int seq, bool causal, const float* probs, float* grad, float scale) {
  if (rows == 0 || seq <= 0) return;
  attention_softmax_backward_kernel<<<grid_for(rows, kRowsPerBlock), kBlock>>>(rows, seq, causal, probs, grad, scale);
  check_launch();
}

void cross_entropy(int n, int v, const float* logits, const std::int32_t* targets, float scale, float* dlogits,
                   double* row_loss) {
  if (n <= 0 || v <= 0) return;
  cross_entropy_kernel<<<grid_for(n, kRowsPerBlock), kBlock>>>(n, v, logits, targets, scale, dlogits, row_loss);
  check_launch();
}

double sum_of_squares(std::size_t n, const float* x) {
  if (n == 0) return 0;
  const std::size_t chunks = (n + kSquaresChunk - 1) / kSquaresChunk;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  const auto slices = scratch_slices(scratch, {chunks * sizeof(double), sizeof(double)});
  double* partial = static_cast<double*>(slices[0]);
  double* total = static_cast<double*>(slices[1]);
  sum_squares_partial_kernel<<<grid_for(chunks, 1), kBlock>>>(n, chunks, x, partial);
  check_launch();
  sum_partials_kernel<<<1, kBlock>>>(chunks, partial, total);
  check_launch();
  double host = 0;  // the one scalar the step reads back (the clip scale and the logged norm)
  SKEW_CUDA_CHECK(cudaMemcpy(&host, total, sizeof(double), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace skew::kernels::moe::cuda
