// CUDA twins of the wide kernels for LR and FM (FFM: kernels/cuda/wide_ffm.cu, dispatched here).
//  classical: one thread per sample; gather, predict, scatter with global atomics.
//  flow: the batch's tiles are sorted by feature with cub::DeviceSegmentedRadixSort (one
//  segment per tile of samples, the sample side of the 2D partition); one block per tile keeps
//  the tile's per-sample partial sums in shared memory from gather to scatter, accumulates the
//  gradients of the hot features (ids below the cached count: the feature side of the partition)
//  in replicated shared-memory copies indexed by thread id modulo the copy count, and writes
//  them with one atomic per weight per tile; cold features take global atomics directly.
#include <cub/device/device_segmented_radix_sort.cuh>
#include <limits>

#include "kernels/cuda/wide_ffm.cuh"
#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels {

namespace {

constexpr int kMaxRow = 34;      // acc_len and row_len bound: k <= 32
constexpr int kReplicas = 2;     // shared-memory copies of each hot accumulator
constexpr int kThreads = 128;
constexpr std::size_t kSharedBudget = 40 * 1024;

template <typename Program>
__global__ void classical_kernel(Program prog, int row_len, WideBatch b, const float* params, float* grad, float* logits) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= b.rows) return;
  float acc[kMaxRow] = {};
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
    prog.gather(params + 1 + std::int64_t(b.index[e]) * row_len, b.value[e], acc);
  const float z = prog.apply(acc, params[0]);
  logits[i] = z;
  const float g = 1.0f / (1.0f + expf(-z)) - b.label[i];
  atomicAdd(grad, g);
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
    const std::int64_t off = 1 + std::int64_t(b.index[e]) * row_len;
    float row_grad[kMaxRow] = {};
    prog.scatter(params + off, b.value[e], acc, g, row_grad);
    for (int j = 0; j < row_len; ++j) atomicAdd(grad + off + j, row_grad[j]);
  }
}

// Per sample: its tile-local index for every entry, entry ids, and tile segment offsets.
__global__ void prepare_kernel(WideBatch b, int tile, std::int64_t base, std::uint32_t* sample_of, std::uint32_t* entry,
                               int* segment) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= b.rows) return;
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
    sample_of[e - base] = std::uint32_t(i % tile);
    entry[e - base] = std::uint32_t(e - base);
  }
  if (i % tile == 0) segment[i / tile] = int(b.row_ptr[i] - base);
  if (i == b.rows - 1) segment[(b.rows + tile - 1) / tile] = int(b.row_ptr[b.rows] - base);
}

template <typename Program>
__global__ void flow_kernel(Program prog, int row_len, int tile, int hot, WideBatch b, std::int64_t base,
                            const std::uint32_t* keys, const std::uint32_t* entries, const std::uint32_t* sample_of,
                            const int* segment, const float* params, float* grad, float* logits) {
  extern __shared__ float shared[];
  const int acc_len = prog.acc_len();
  float* acc = shared;                         // tile x acc_len partial sums
  float* sample_grad = acc + tile * acc_len;   // tile
  float* cache = sample_grad + tile;           // kReplicas x hot x row_len
  const int cache_len = hot * row_len;
  for (int j = threadIdx.x; j < tile * acc_len + tile + kReplicas * cache_len; j += blockDim.x) shared[j] = 0.0f;
  __syncthreads();
  const std::int64_t first = std::int64_t(blockIdx.x) * tile;
  const int samples = int(min(std::int64_t(tile), b.rows - first));
  const int begin = segment[blockIdx.x], end = segment[blockIdx.x + 1];
  // gather: feature -> sample (entries sorted by feature: a feature's row is read by neighbours).
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x) {
    float local[kMaxRow] = {};
    const std::uint32_t entry = entries[e];
    prog.gather(params + 1 + std::int64_t(keys[e]) * row_len, b.value[base + entry], local);
    float* target = acc + sample_of[entry] * acc_len;
    for (int j = 0; j < acc_len; ++j) atomicAdd(target + j, local[j]);
  }
  __syncthreads();
  for (int s = threadIdx.x; s < samples; s += blockDim.x) {
    const float z = prog.apply(acc + s * acc_len, params[0]);
    logits[first + s] = z;
    const float g = 1.0f / (1.0f + expf(-z)) - b.label[first + s];
    sample_grad[s] = g;
    atomicAdd(grad, g);
  }
  __syncthreads();
  // scatter: sample -> feature; hot rows into the shared replicas, cold rows straight out.
  float* replica = cache + (threadIdx.x % kReplicas) * cache_len;
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const std::uint32_t entry = entries[e], s = sample_of[entry], f = keys[e];
    float row_grad[kMaxRow] = {};
    prog.scatter(params + 1 + std::int64_t(f) * row_len, b.value[base + entry], acc + s * acc_len, sample_grad[s], row_grad);
    float* out = f < std::uint32_t(hot) ? replica + std::int64_t(f) * row_len : grad + 1 + std::int64_t(f) * row_len;
    for (int j = 0; j < row_len; ++j) atomicAdd(out + j, row_grad[j]);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < cache_len; j += blockDim.x) {
    float sum = 0.0f;
    for (int r = 0; r < kReplicas; ++r) sum += cache[r * cache_len + j];
    if (sum != 0.0f) atomicAdd(grad + 1 + j, sum);
  }
}

void check_supported(const WideShape& s) {
  SKEW_CHECK(s.row_len() <= kMaxRow - 1, "the CUDA LR/FM kernels support k <= 32, got k = " << s.k);
}

template <typename Fn>
void with_program(const WideShape& s, Fn&& fn) {
  if (s.kind == WideKind::LR) fn(LrProgram{s.k});
  else fn(FmProgram{s.k});
}

}  // namespace

void wide_classical_gradient_cuda(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                                  float* logits, void* stream) {
  if (shape.kind == WideKind::FFM) return wide_ffm_classical_cuda(shape, batch, params, grad, logits, cudaStream_t(stream));
  check_supported(shape);
  if (batch.rows == 0) return;
  const unsigned blocks = unsigned((batch.rows + kThreads - 1) / kThreads);
  with_program(shape, [&](auto prog) {
    classical_kernel<<<blocks, kThreads, 0, cudaStream_t(stream)>>>(prog, shape.row_len(), batch, params, grad, logits);
  });
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void wide_flow_gradient_cuda(const WideShape& shape, const WideFlowOptions& options, const WideBatch& batch,
                             std::int64_t base, std::int64_t nnz, const float* params, float* grad, float* logits,
                             void* stream_ptr) {
  cudaStream_t stream = cudaStream_t(stream_ptr);
  if (shape.kind == WideKind::FFM) return wide_ffm_flow_cuda(shape, options, batch, params, grad, logits, stream);
  check_supported(shape);
  if (batch.rows == 0) return;
  const int tile = std::max(1, std::min(options.tile_samples, 64));
  const int tiles = int((batch.rows + tile - 1) / tile);
  const int row_len = shape.row_len(), acc_len = shape.kind == WideKind::LR ? 1 : 2 + shape.k;
  const std::size_t fixed = std::size_t(tile) * (acc_len + 1) * sizeof(float);
  const std::int64_t hot_fit = std::int64_t((kSharedBudget - fixed) / (kReplicas * row_len * sizeof(float)));
  const int hot = int(std::max<std::int64_t>(0, std::min({options.hot_features, shape.num_features, hot_fit})));
  const std::size_t shared = fixed + std::size_t(kReplicas) * hot * row_len * sizeof(float);

  // The step's scratch comes from the device's default pool, which by default hands memory back
  // to the driver at every synchronisation (each training step ends with one): keep it mapped.
  static const bool pool_kept = [] {
    int device = 0;
    SKEW_CUDA_CHECK(cudaGetDevice(&device));
    cudaMemPool_t pool;
    SKEW_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    SKEW_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    return true;
  }();
  (void)pool_kept;
  // CUB's segmented sort counts items and offsets in int.
  SKEW_CHECK(nnz <= std::numeric_limits<int>::max(), "a batch of " << nnz << " nonzeros is too large for one flow step");
  // A batch of empty rows has no entries: allocate one, as zero-byte allocations need not succeed.
  const std::size_t entry_bytes = std::size_t(std::max<std::int64_t>(nnz, 1)) * sizeof(std::uint32_t);
  std::uint32_t *keys_out, *entry_in, *entry_out, *sample_of;
  int* segment;
  SKEW_CUDA_CHECK(cudaMallocAsync(&keys_out, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&entry_in, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&entry_out, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&sample_of, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&segment, (tiles + 1) * sizeof(int), stream));
  prepare_kernel<<<unsigned((batch.rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(batch, tile, base, sample_of,
                                                                                             entry_in, segment);
  SKEW_CUDA_CHECK(cudaGetLastError());
  const int bits = std::max(1, int(64 - __builtin_clzll(std::uint64_t(shape.num_features))));
  std::size_t temp_bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, batch.index + base, keys_out, entry_in,
                                                           entry_out, nnz, tiles, segment, segment + 1, 0, bits, stream));
  void* temp;
  SKEW_CUDA_CHECK(cudaMallocAsync(&temp, temp_bytes, stream));
  SKEW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, batch.index + base, keys_out, entry_in,
                                                           entry_out, nnz, tiles, segment, segment + 1, 0, bits, stream));
  with_program(shape, [&](auto prog) {
    flow_kernel<<<tiles, kThreads, shared, stream>>>(prog, row_len, tile, hot, batch, base, keys_out, entry_out, sample_of,
                                                     segment, params, grad, logits);
  });
  SKEW_CUDA_CHECK(cudaGetLastError());
  for (void* p : {static_cast<void*>(keys_out), static_cast<void*>(entry_in), static_cast<void*>(entry_out),
                  static_cast<void*>(sample_of), static_cast<void*>(segment), temp})
    SKEW_CUDA_CHECK(cudaFreeAsync(p, stream));
}

}  // namespace skew::kernels
