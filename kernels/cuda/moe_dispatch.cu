// CUDA twins of the MoE kernels (kernels/moe_dispatch.hpp, moe_gate.hpp, moe_expert.hpp):
// CUB DeviceHistogram / DeviceScan / DeviceRadixSort for the dispatch permutation, one thread
// per token for softmax + top-k (the expert GEMM is kernels::gemm_bf16, per expert). Scratch comes
// from grow-only per-call buffers (kernels/cuda/scratch.hpp): no cudaMalloc in a steady step.
#include <algorithm>
#include <cstdint>
#include <cub/cub.cuh>
#include <limits>

#include "core/cuda_check.hpp"
#include "kernels/cuda/scratch.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_gate.hpp"

namespace skew::kernels::moe::cuda {
namespace {

constexpr int kBlock = 256;
int blocks(std::int64_t n) {
  return static_cast<int>((n + kBlock - 1) / kBlock);
}

// CUB takes 64-bit item counts here, but the sort carries token indices as int32 and the
// histogram counts in int: a dispatch of more assignments than that is refused, not truncated.
void check_items(std::int64_t n, const char* what) {
  SKEW_CHECK(n >= 0 && n <= std::numeric_limits<std::int32_t>::max(),
             what << ": " << n << " assignments, more than the 2^31-1 one dispatch indexes");
}

__global__ void widen(const int* in, int n, std::int64_t* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// sorted_keys/sorted_idx: the keys in stable sorted order and their original indices; the j-th
// sorted item is number (j - first[key]) of its bin, so it lands at offsets[key] + that.
__global__ void place(const std::int32_t* sorted_keys, const std::int32_t* sorted_idx, std::int64_t n,
                      const std::int64_t* first, const std::int64_t* offsets, std::int64_t* pos) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < n) pos[sorted_idx[j]] = offsets[sorted_keys[j]] + j - first[sorted_keys[j]];
}

__global__ void iota(std::int32_t* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<std::int32_t>(i);
}

// One block per row (grid-stride over rows): the destination row is read once per thread, and
// rows whose width and addresses allow it move as float4, 16 bytes per access. A thread per float
// with a 64-bit division and modulo per element (the first version) reached 55% of the copy bound.
template <typename Vec>
__global__ void scatter_row_blocks(const Vec* in, const std::int64_t* pos, std::int64_t n, int vecs_per_row, Vec* out) {
  for (std::int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const Vec* src = in + row * vecs_per_row;
    Vec* dst = out + pos[row] * vecs_per_row;
    for (int v = threadIdx.x; v < vecs_per_row; v += blockDim.x) dst[v] = src[v];
  }
}

__global__ void softmax_topk_kernel(int n, int E, int k, const float* logits, float* probs, float* lse,
                                    std::int32_t* expert, float* weight) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const float* l = logits + static_cast<std::size_t>(t) * E;
  float* p = probs + static_cast<std::size_t>(t) * E;
  float mx = l[0];
  for (int e = 1; e < E; ++e) mx = fmaxf(mx, l[e]);
  float z = 0;
  for (int e = 0; e < E; ++e) z += expf(l[e] - mx);
  const float s = mx + logf(z);
  lse[t] = s;
  for (int e = 0; e < E; ++e) p[e] = expf(l[e] - s);
  select_topk(p, E, k, expert + static_cast<std::size_t>(t) * k, weight + static_cast<std::size_t>(t) * k);
}

}  // namespace

void histogram(const std::int32_t* keys, std::int64_t n, int bins, std::int64_t* counts) {
  check_items(n, "moe histogram");
  if (n == 0) {  // nothing to count: zero the counts without a histogram pass or a launch
    if (bins > 0) SKEW_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(std::int64_t) * static_cast<std::size_t>(bins)));
    return;
  }
  SKEW_CHECK(bins > 0, "moe histogram: " << n << " keys into " << bins << " bins");
  thread_local DeviceArray<char> scratch(Device::Cuda);
  std::size_t bytes = 0;
  SKEW_CUDA_CHECK(
      cub::DeviceHistogram::HistogramEven(nullptr, bytes, keys, static_cast<int*>(nullptr), bins + 1, 0, bins, n));
  const auto s = scratch_slices(scratch, {sizeof(int) * static_cast<std::size_t>(bins), bytes});
  int* narrow = static_cast<int*>(s[0]);
  SKEW_CUDA_CHECK(cub::DeviceHistogram::HistogramEven(s[1], bytes, keys, narrow, bins + 1, 0, bins, n));
  widen<<<blocks(bins), kBlock>>>(narrow, bins, counts);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void exclusive_scan(const std::int64_t* in, int n, std::int64_t* out) {
  if (n == 0) return;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  std::size_t bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n));
  SKEW_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch_slices(scratch, {bytes})[0], bytes, in, out, n));
}

void stable_positions(const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos) {
  check_items(n, "moe permutation");
  if (n == 0) return;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  const std::size_t items = static_cast<std::size_t>(n), bin_bytes = sizeof(std::int64_t) * std::size_t(bins);
  int end_bit = 1;
  while ((1 << end_bit) < bins) ++end_bit;
  std::size_t sort_bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys, static_cast<std::int32_t*>(nullptr),
                                                  static_cast<const std::int32_t*>(nullptr),
                                                  static_cast<std::int32_t*>(nullptr), n, 0, end_bit));
  const std::size_t idx_bytes = sizeof(std::int32_t) * items;
  const auto s = scratch_slices(scratch, {idx_bytes, idx_bytes, idx_bytes, bin_bytes, bin_bytes, sort_bytes});
  auto* idx = static_cast<std::int32_t*>(s[0]);
  auto* sorted_keys = static_cast<std::int32_t*>(s[1]);
  auto* sorted_idx = static_cast<std::int32_t*>(s[2]);
  auto* counts = static_cast<std::int64_t*>(s[3]);
  auto* first = static_cast<std::int64_t*>(s[4]);
  iota<<<blocks(n), kBlock>>>(idx, n);
  SKEW_CUDA_CHECK(cudaGetLastError());
  SKEW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s[5], sort_bytes, keys, sorted_keys, idx, sorted_idx, n, 0, end_bit));
  histogram(keys, n, bins, counts);
  exclusive_scan(counts, bins, first);
  place<<<blocks(n), kBlock>>>(sorted_keys, sorted_idx, n, first, offsets, pos);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void scatter_rows(const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out) {
  SKEW_CHECK(n >= 0 && width >= 0, "moe scatter_rows: " << n << " rows of width " << width);
  if (n == 0 || width == 0) return;
  const int grid = static_cast<int>(std::min<std::int64_t>(n, 1 << 16));
  const bool vectorisable = width % 4 == 0 && reinterpret_cast<std::uintptr_t>(in) % 16 == 0 &&
                            reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const int vecs = vectorisable ? width / 4 : width;
  const int threads = std::min(kBlock, (vecs + 31) / 32 * 32);
  if (vectorisable)
    scatter_row_blocks<<<grid, threads>>>(reinterpret_cast<const float4*>(in), pos, n, vecs,
                                          reinterpret_cast<float4*>(out));
  else
    scatter_row_blocks<<<grid, threads>>>(in, pos, n, vecs, out);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void softmax_topk(int n, int experts, int k, const float* logits, float* probs, float* lse, std::int32_t* expert,
                  float* weight) {
  if (n == 0) return;
  softmax_topk_kernel<<<blocks(n), kBlock>>>(n, experts, k, logits, probs, lse, expert, weight);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels::moe::cuda
