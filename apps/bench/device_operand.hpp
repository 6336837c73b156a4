// Device memory a GPU benchmark owns for one measurement (CUDA builds only): allocated or
// uploaded on construction, freed when it goes out of scope, so that no bench frees by hand.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>

#include "kernels/cuda_memory.hpp"

namespace skew::bench {

template <typename T>
class DeviceArray {
 public:
  // `count` elements, uninitialised (at least one: the address is never null).
  explicit DeviceArray(std::size_t count) : data_(kernels::cuda::device_alloc<T>(count)) {}
  // A device copy of `host`, any contiguous range of T (synchronous).
  template <typename Range>
  requires requires(const Range& r) {
    { r.data() } -> std::convertible_to<const T*>;
    r.size();
  }
  explicit DeviceArray(const Range& host) : data_(kernels::cuda::upload(host)) {}
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_) { other.data_ = nullptr; }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray& operator=(DeviceArray&&) = delete;
  // Unchecked: a destructor cannot throw, and the run's own calls report a broken device.
  ~DeviceArray() { cudaFree(data_); }
  T* get() const { return data_; }
  operator T*() const { return data_; }

 private:
  T* data_;
};

}  // namespace skew::bench
#endif
