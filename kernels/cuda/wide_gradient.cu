// CUDA twins of the wide kernels for LR and FM (FFM: kernels/cuda/wide_ffm.cu, dispatched here).
//  classical: one thread per sample; gather, predict, scatter with global atomics (the bias
//  gradient summed per block first: one atomic per block, not one per sample on one address).
//  flow: the batch's tiles are sorted by feature with cub::DeviceSegmentedRadixSort (one
//  segment per tile of samples, the sample side of the 2D partition), so equal features are
//  contiguous. One block per tile keeps the tile's per-sample partial sums in shared memory from
//  gather to scatter. In the scatter each warp takes a window of 32 sorted entries and reduces
//  every run of equal features with a segmented shuffle reduction (kernels/wide_tile.hpp), so a
//  feature's gradient row leaves the warp once per window instead of once per entry. Hot
//  features (ids below the cached count: the feature side of the partition) add those sums into
//  a shared-memory row that only the tile's hot features have (zeroed and flushed by the entry
//  that starts the feature's run in the tile), reaching global memory in one atomic per weight
//  per tile; cold features add their window sums with global atomics directly.
#include <cub/device/device_segmented_radix_sort.cuh>
#include <limits>
#include <mutex>
#include <set>

#include "core/cuda_check.hpp"
#include "core/log.hpp"
#include "kernels/cuda/wide_block.cuh"
#include "kernels/cuda/wide_ffm.cuh"
#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_tile.hpp"

namespace skew::kernels {

namespace {

constexpr int kMaxRow = 34;  // acc_len and row_len bound: k <= 32
constexpr int kThreads = 128;
constexpr int kMaxTile = 64;  // samples per tile: their partial sums live in shared memory
constexpr std::size_t kSharedBudget = 40 * 1024;

template <typename Program>
__global__ void classical_kernel(Program prog, int row_len, WideBatch b, const float* params, float* grad,
                                 float* logits) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float g = 0.0f;  // threads past the batch add nothing to the bias but join its block sum
  if (i < b.rows) {
    float acc[kMaxRow] = {};
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
      prog.gather(params + 1 + std::int64_t(b.index[e]) * row_len, b.value[e], acc);
    const float z = prog.apply(acc, params[0]);
    logits[i] = z;
    g = 1.0f / (1.0f + expf(-z)) - b.label[i];
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
      const std::int64_t off = 1 + std::int64_t(b.index[e]) * row_len;
      float row_grad[kMaxRow] = {};
      prog.scatter(params + off, b.value[e], acc, g, row_grad);
      for (int j = 0; j < row_len; ++j) atomicAdd(grad + off + j, row_grad[j]);
    }
  }
  wide_block_sum_to(g, grad);
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

// Whether sorted entry e starts its feature's run in the tile [begin, end): the one entry per
// feature that zeroes and flushes a hot row.
__device__ inline bool starts_run(const std::uint32_t* keys, int begin, int e) {
  return e == begin || keys[e - 1] != keys[e];
}

template <typename Program>
__global__ void flow_kernel(Program prog, int row_len, int tile, int hot, WideBatch b, std::int64_t base,
                            const std::uint32_t* keys, const std::uint32_t* entries, const std::uint32_t* sample_of,
                            const int* segment, const float* params, float* grad, float* logits) {
  extern __shared__ float shared[];
  __shared__ std::uint32_t window_keys[kThreads];  // each warp's 32 keys of the window it reduces
  const int acc_len = prog.acc_len();
  float* acc = shared;                        // tile x acc_len partial sums
  float* sample_grad = acc + tile * acc_len;  // tile
  float* cache = sample_grad + tile;          // hot x row_len: only the tile's hot rows are used
  const int begin = segment[blockIdx.x], end = segment[blockIdx.x + 1];
  for (int j = threadIdx.x; j < tile * (acc_len + 1); j += blockDim.x) shared[j] = 0.0f;
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x)
    if (keys[e] < std::uint32_t(hot) && starts_run(keys, begin, e))
      for (int j = 0; j < row_len; ++j) cache[std::int64_t(keys[e]) * row_len + j] = 0.0f;
  __syncthreads();
  const std::int64_t first = std::int64_t(blockIdx.x) * tile;
  const int samples = int(min(std::int64_t(tile), b.rows - first));
  // gather: feature -> sample (entries sorted by feature: a feature's row is read by neighbours).
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x) {
    float local[kMaxRow] = {};
    const std::uint32_t entry = entries[e];
    prog.gather(params + 1 + std::int64_t(keys[e]) * row_len, b.value[base + entry], local);
    float* target = acc + sample_of[entry] * acc_len;
    for (int j = 0; j < acc_len; ++j) atomicAdd(target + j, local[j]);
  }
  __syncthreads();
  float bias = 0.0f;
  for (int s = threadIdx.x; s < samples; s += blockDim.x) {
    const float z = prog.apply(acc + s * acc_len, params[0]);
    logits[first + s] = z;
    const float g = 1.0f / (1.0f + expf(-z)) - b.label[first + s];
    sample_grad[s] = g;
    bias += g;
  }
  wide_block_sum_to(bias, grad);
  __syncthreads();  // sample_grad complete
  // scatter: sample -> feature, a warp per window of 32 sorted entries (the loop is uniform over
  // the warp, as the shuffles need every lane); lanes past the tile hold no key and zeros.
  const int lane = threadIdx.x % kWideWarp, warp = threadIdx.x / kWideWarp, warps = blockDim.x / kWideWarp;
  std::uint32_t* my_keys = window_keys + warp * kWideWarp;
  for (int window = begin + warp * kWideWarp; window < end; window += warps * kWideWarp) {
    const int e = window + lane;
    const bool live = e < end;
    const std::uint32_t f = live ? keys[e] : kWideNoKey;
    my_keys[lane] = f;
    __syncwarp();
    float row_grad[kMaxRow] = {};
    if (live) {
      const std::uint32_t entry = entries[e], s = sample_of[entry];
      prog.scatter(params + 1 + std::int64_t(f) * row_len, b.value[base + entry], acc + s * acc_len, sample_grad[s],
                   row_grad);
    }
    bool takes[5];
    for (int step = 0; step < 5; ++step) takes[step] = wide_run_takes(my_keys, kWideWarp, lane, 1 << step);
    const bool head = live && wide_run_head(my_keys, lane);
    float* out = !live                    ? nullptr
                 : f < std::uint32_t(hot) ? cache + std::int64_t(f) * row_len
                                          : grad + 1 + std::int64_t(f) * row_len;
    for (int j = 0; j < row_len; ++j) {
      float v = row_grad[j];
      for (int step = 0; step < 5; ++step) {
        const float later = __shfl_down_sync(0xffffffffu, v, 1 << step);
        if (takes[step]) v += later;
      }
      if (head) atomicAdd(out + j, v);
    }
    __syncwarp();  // every lane has read my_keys before the next window overwrites it
  }
  __syncthreads();
  for (int e = begin + threadIdx.x; e < end; e += blockDim.x)
    if (keys[e] < std::uint32_t(hot) && starts_run(keys, begin, e))
      for (int j = 0; j < row_len; ++j) {
        const std::int64_t at = std::int64_t(keys[e]) * row_len + j;
        atomicAdd(grad + 1 + at, cache[at]);
      }
}

void check_supported(const WideShape& s) {
  SKEW_CHECK(s.row_len() <= kMaxRow - 1, "the CUDA LR/FM kernels support k <= 32, got k = " << s.k);
}

template <typename Fn>
void with_program(const WideShape& s, Fn&& fn) {
  if (s.kind == WideKind::LR)
    fn(LrProgram{s.k});
  else
    fn(FmProgram{s.k});
}

}  // namespace

void wide_log_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!seen.insert(message).second) return;
  }
  SKEW_INFO(message);
}

// The kernels' launch choices for the flow options, said once when they differ from the request:
// both caps are properties of the kernels (shared memory per block), not errors of the user's
// setting, which the CPU flow schema honours as given.
int wide_cuda_tile(const WideFlowOptions& options, int max_tile, const char* model) {
  SKEW_CHECK(options.tile_samples >= 1,
             "tile_samples (train.tile_samples / bench.tile_samples) must be at least 1, got " << options.tile_samples);
  const int tile = std::min(options.tile_samples, max_tile);
  if (tile != options.tile_samples)
    wide_log_once("CUDA flow " + std::string(model) + ": tile_samples = " + std::to_string(options.tile_samples) +
                  " (train.tile_samples / bench.tile_samples), using tiles of " + std::to_string(tile) +
                  " samples, the most whose per-sample state fits the kernel's shared memory");
  return tile;
}

int wide_cuda_hot(const WideShape& shape, const WideFlowOptions& options, std::int64_t fit, std::size_t budget,
                  const char* model) {
  SKEW_CHECK(options.hot_features >= 0,
             "hot_features (train.hot_features / bench.hot_features) must be at least 0, got " << options.hot_features);
  const std::int64_t wanted = std::min(options.hot_features, shape.num_features);
  const std::int64_t hot = std::max<std::int64_t>(0, std::min(wanted, fit));
  if (hot != wanted)
    wide_log_once("CUDA flow " + std::string(model) + ": hot_features = " + std::to_string(options.hot_features) +
                  " (train.hot_features / bench.hot_features), caching the gradient rows of the " +
                  std::to_string(hot) + " hottest features, as many as " + std::to_string(budget / 1024) +
                  " KiB of shared memory per block hold at row length " + std::to_string(shape.row_len()));
  return int(hot);
}

void wide_classical_gradient_cuda(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                                  float* logits, void* stream) {
  if (shape.kind == WideKind::FFM)
    return wide_ffm_classical_cuda(shape, batch, params, grad, logits, cudaStream_t(stream));
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
  const int tile = wide_cuda_tile(options, kMaxTile, "LR/FM");
  const int tiles = int((batch.rows + tile - 1) / tile);
  const int row_len = shape.row_len(), acc_len = shape.kind == WideKind::LR ? 1 : 2 + shape.k;
  const std::size_t fixed = std::size_t(tile) * (acc_len + 1) * sizeof(float);
  const int hot = wide_cuda_hot(shape, options, std::int64_t((kSharedBudget - fixed) / (row_len * sizeof(float))),
                                kSharedBudget, "LR/FM");
  const std::size_t shared = fixed + std::size_t(hot) * row_len * sizeof(float);

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
  SKEW_CHECK(nnz <= std::numeric_limits<int>::max(),
             "a batch of " << nnz << " nonzeros is too large for one flow step");
  // A batch of empty rows has no entries: allocate one, as zero-byte allocations need not succeed.
  const std::size_t entry_bytes = std::size_t(std::max<std::int64_t>(nnz, 1)) * sizeof(std::uint32_t);
  std::uint32_t *keys_out, *entry_in, *entry_out, *sample_of;
  int* segment;
  SKEW_CUDA_CHECK(cudaMallocAsync(&keys_out, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&entry_in, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&entry_out, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&sample_of, entry_bytes, stream));
  SKEW_CUDA_CHECK(cudaMallocAsync(&segment, (tiles + 1) * sizeof(int), stream));
  prepare_kernel<<<unsigned((batch.rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      batch, tile, base, sample_of, entry_in, segment);
  SKEW_CUDA_CHECK(cudaGetLastError());
  const int bits = std::max(1, int(64 - __builtin_clzll(std::uint64_t(shape.num_features))));
  std::size_t temp_bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, temp_bytes, batch.index + base, keys_out, entry_in,
                                                           entry_out, nnz, tiles, segment, segment + 1, 0, bits,
                                                           stream));
  void* temp;
  SKEW_CUDA_CHECK(cudaMallocAsync(&temp, temp_bytes, stream));
  SKEW_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, batch.index + base, keys_out, entry_in,
                                                           entry_out, nnz, tiles, segment, segment + 1, 0, bits,
                                                           stream));
  with_program(shape, [&](auto prog) {
    flow_kernel<<<tiles, kThreads, shared, stream>>>(prog, row_len, tile, hot, batch, base, keys_out, entry_out,
                                                     sample_of, segment, params, grad, logits);
  });
  SKEW_CUDA_CHECK(cudaGetLastError());
  for (void* p : {static_cast<void*>(keys_out), static_cast<void*>(entry_in), static_cast<void*>(entry_out),
                  static_cast<void*>(sample_of), static_cast<void*>(segment), temp})
    SKEW_CUDA_CHECK(cudaFreeAsync(p, stream));
}

}  // namespace skew::kernels
