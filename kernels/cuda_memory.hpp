// Device and pinned host buffers (CUDA builds only), shared by the GPU trainer
// (lib/wide/gpu_trainer.cpp) and the GPU benchmark apps: allocation, upload, and the grow-only
// staging buffers a trainer refills every batch.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cuda_check.hpp"

namespace skew::kernels::cuda {

// n elements of device memory, uninitialised; at least one, so that the pointer is never null
// (kernels and copies of an empty model or batch still get a valid address).
template <typename T>
T* device_alloc(std::size_t n) {
  T* p = nullptr;
  SKEW_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(1, n) * sizeof(T)));
  return p;
}

// A device copy of v, any contiguous range (synchronous).
template <typename Range, typename T = std::remove_cvref_t<decltype(*std::declval<const Range&>().data())>>
T* upload(const Range& v) {
  T* p = device_alloc<T>(v.size());
  if (!v.empty()) SKEW_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// Makes p hold at least n elements, reallocating (contents dropped: staging buffers are
// refilled whole) only when `capacity` is smaller, so that steady batches allocate nothing.
// Pinned (page-locked) host memory is what asynchronous host-to-device copies need.
template <typename T>
void grow(T*& p, std::size_t& capacity, std::size_t n, bool pinned) {
  if (n <= capacity) return;
  if (p) SKEW_CUDA_CHECK(pinned ? cudaFreeHost(p) : cudaFree(p));
  SKEW_CUDA_CHECK(pinned ? cudaMallocHost(&p, n * sizeof(T)) : cudaMalloc(&p, n * sizeof(T)));
  capacity = n;
}
template <typename T>
void grow_device(T*& p, std::size_t& capacity, std::size_t n) {
  grow(p, capacity, n, false);
}
template <typename T>
void grow_pinned(T*& p, std::size_t& capacity, std::size_t n) {
  grow(p, capacity, n, true);
}

// Grow-only device scratch that one kernel wrapper carves into aligned slices on every call, so a
// steady step loop allocates nothing: cudaMalloc and cudaFree synchronise the device and cost
// more than the small kernels they feed. One per wrapper and thread (thread_local); a slice
// stays valid until the wrapper's next call, which is ordered after this one on the same stream.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() { cudaFree(base_); }
  // Room for slices of these sizes in bytes; their addresses, in order, each 256-byte aligned.
  std::vector<void*> slices(std::initializer_list<std::size_t> sizes) {
    std::size_t total = 0;
    for (std::size_t bytes : sizes) total += aligned(bytes);
    grow_device(base_, capacity_, std::max<std::size_t>(total, 1));
    std::vector<void*> out;
    std::size_t offset = 0;
    for (std::size_t bytes : sizes) {
      out.push_back(base_ + offset);
      offset += aligned(bytes);
    }
    return out;
  }

 private:
  static std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace skew::kernels::cuda
#endif
