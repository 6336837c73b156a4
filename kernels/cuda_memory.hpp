// Raw device allocations (CUDA builds only) that the GPU benchmark apps still free by hand with
// cudaFree; everything else holds device memory in skew::DeviceArray (core/device_array.hpp).
// This header goes when the apps move onto DeviceArray.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>
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

}  // namespace skew::kernels::cuda
#endif
