// A GPU benchmark's operand (CUDA builds only): a skew::DeviceArray on the GPU, sized or uploaded
// once on construction and released to the caching allocator when it goes out of scope, that
// passes as the raw pointer the kernels take. No bench allocates or frees device memory by hand.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <algorithm>
#include <concepts>
#include <cstddef>

#include "core/device_array.hpp"

namespace skew::bench {

template <typename T>
class DeviceOperand {
 public:
  // `count` elements, uninitialised (at least one: the address is never null).
  explicit DeviceOperand(std::size_t count) { array_.resize_for_overwrite(std::max<std::size_t>(1, count)); }
  // A device copy of `host`, any contiguous range of T (synchronous).
  template <typename Range>
  requires requires(const Range& r) {
    { r.data() } -> std::convertible_to<const T*>;
    r.size();
  }
  explicit DeviceOperand(const Range& host) : DeviceOperand(std::size_t(host.size())) {
    if (host.size() > 0) array_.upload(host.data(), std::size_t(host.size()));
  }
  // The kernels write through a const operand: constness is the handle's, not the values'.
  T* get() const { return const_cast<T*>(array_.data()); }
  operator T*() const { return get(); }

 private:
  DeviceArray<T> array_{Device::Cuda};
};

}  // namespace skew::bench
#endif
