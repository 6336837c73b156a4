// CUDA twins of the MoE kernels (kernels/moe_dispatch.hpp, moe_gate.hpp, moe_expert.hpp):
// CUB DeviceHistogram / DeviceScan / DeviceRadixSort for the dispatch permutation, one thread
// per token for softmax + top-k (the expert GEMM is kernels::gemm_bf16, per expert).
#include <cub/cub.cuh>

#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_gate.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels::moe::cuda {
namespace {

// Device scratch that frees itself (CUB's two-phase temp storage and intermediates).
struct Scratch {
  void* ptr = nullptr;
  explicit Scratch(std::size_t bytes) {
    if (bytes) SKEW_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  }
  ~Scratch() { cudaFree(ptr); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

constexpr int kBlock = 256;
int blocks(std::int64_t n) {
  return static_cast<int>((n + kBlock - 1) / kBlock);
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

__global__ void scatter(const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * width) out[pos[i / width] * width + i % width] = in[i];
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
  Scratch narrow(sizeof(int) * static_cast<std::size_t>(bins));
  std::size_t bytes = 0;
  const int num = static_cast<int>(n);
  SKEW_CUDA_CHECK(cub::DeviceHistogram::HistogramEven(nullptr, bytes, keys, narrow.as<int>(), bins + 1, 0, bins, num));
  Scratch temp(bytes);
  SKEW_CUDA_CHECK(cub::DeviceHistogram::HistogramEven(temp.ptr, bytes, keys, narrow.as<int>(), bins + 1, 0, bins, num));
  widen<<<blocks(bins), kBlock>>>(narrow.as<int>(), bins, counts);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void exclusive_scan(const std::int64_t* in, int n, std::int64_t* out) {
  std::size_t bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n));
  Scratch temp(bytes);
  SKEW_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.ptr, bytes, in, out, n));
}

void stable_positions(const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos) {
  if (n == 0) return;
  const std::size_t items = static_cast<std::size_t>(n);
  Scratch idx(sizeof(std::int32_t) * items), sorted_keys(sizeof(std::int32_t) * items),
      sorted_idx(sizeof(std::int32_t) * items);
  Scratch counts(sizeof(std::int64_t) * static_cast<std::size_t>(bins)),
      first(sizeof(std::int64_t) * static_cast<std::size_t>(bins));
  iota<<<blocks(n), kBlock>>>(idx.as<std::int32_t>(), n);
  SKEW_CUDA_CHECK(cudaGetLastError());
  int end_bit = 1;
  while ((1 << end_bit) < bins) ++end_bit;
  std::size_t bytes = 0;
  SKEW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, sorted_keys.as<std::int32_t>(),
                                                  idx.as<std::int32_t>(), sorted_idx.as<std::int32_t>(),
                                                  static_cast<int>(n), 0, end_bit));
  Scratch temp(bytes);
  SKEW_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.ptr, bytes, keys, sorted_keys.as<std::int32_t>(),
                                                  idx.as<std::int32_t>(), sorted_idx.as<std::int32_t>(),
                                                  static_cast<int>(n), 0, end_bit));
  histogram(keys, n, bins, counts.as<std::int64_t>());
  exclusive_scan(counts.as<std::int64_t>(), bins, first.as<std::int64_t>());
  place<<<blocks(n), kBlock>>>(sorted_keys.as<std::int32_t>(), sorted_idx.as<std::int32_t>(), n,
                               first.as<std::int64_t>(), offsets, pos);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void scatter_rows(const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out) {
  if (n == 0) return;
  scatter<<<blocks(n * width), kBlock>>>(in, pos, n, width, out);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void softmax_topk(int n, int experts, int k, const float* logits, float* probs, float* lse, std::int32_t* expert,
                  float* weight) {
  if (n == 0) return;
  softmax_topk_kernel<<<blocks(n), kBlock>>>(n, experts, k, logits, probs, lse, expert, weight);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels::moe::cuda
