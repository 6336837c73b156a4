// DeviceArray<T>: the one owning array of skew's data plane, on one device (host or CUDA). The
// MoE networks and layer keep their parameters, gradients and activations in it, the wide GPU
// trainer its staging buffers, the CUDA kernels their scratch, so one chain of ops runs on
// whichever device an array was made for. Storage grows only (a shrink keeps the block) and sits
// on the caching allocator of core/device_memory.hpp: a step loop of steady shapes allocates
// nothing. Copies are deep (a copy is its own storage, on the source's device). Element access
// (operator[], begin, end) is host-only; a device array moves through upload/download, to_host
// and the ops.
#pragma once
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(Device device = Device::Host) : device_(device) {}
  // Page-locked host memory: what asynchronous copies between host and device need.
  static DeviceArray pinned() {
    DeviceArray a(Device::Host);
    a.pinned_ = true;
    return a;
  }
  DeviceArray(const DeviceArray& other) : device_(other.device_), pinned_(other.pinned_) { assign(other); }
  DeviceArray& operator=(const DeviceArray& other) {
    if (this != &other) {
      set_device(other.device_);
      assign(other);
    }
    return *this;
  }
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    DeviceArray(std::move(other)).swap(*this);
    return *this;
  }
  ~DeviceArray() { device_memory::release(kind(), data_, capacity_ * sizeof(T)); }

  Device device() const { return device_; }
  // Moves the (emptied) array to `device`; a no-op when it is there already.
  void set_device(Device device) {
    if (device == device_) return;
    DeviceArray(device).swap(*this);
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }

  // n values: the first min(size, n) keep theirs, any beyond are zero (std::vector::resize).
  void resize(std::size_t n) {
    reserve(n, size_);
    if (n > size_) device_memory::zero(data_ + size_, (n - size_) * sizeof(T), device_);
    size_ = n;
  }
  // n values the caller overwrites whole (staging buffers, kernel scratch): no copy and no zeroing,
  // so the values are unspecified until written.
  void resize_for_overwrite(std::size_t n) {
    reserve(n, 0);
    size_ = n;
  }
  // n zeros.
  void zeros(std::size_t n) {
    reserve(n, 0);
    size_ = n;
    zero();
  }
  // Zeroes the values in place (no allocation: a step loop's reset).
  void zero() { device_memory::zero(data_, size_ * sizeof(T), device_); }
  void clear() { size_ = 0; }

  // A copy of `src`'s values (any device) on this array's device.
  void assign(const DeviceArray& src) { assign_from(src.data(), src.size(), src.device()); }
  // n values from `src` on `src_device`.
  void assign_from(const T* src, std::size_t n, Device src_device) {
    reserve(n, 0);
    size_ = n;
    copy_bytes(data_, device_, src, src_device, n * sizeof(T));
  }
  // n values from `src`, on this array's device (a Cuda array also takes host values).
  void assign_from(const T* src, std::size_t n) { assign_from(src, n, device_); }
  void assign_from(const std::vector<T>& src) { assign_from(src.data(), src.size(), Device::Host); }
  // count host values into [offset, offset + count), and back.
  void upload(const T* host, std::size_t count, std::size_t offset = 0) {
    check_range(count, offset);
    copy_bytes(data_ + offset, device_, host, Device::Host, count * sizeof(T));
  }
  void download(T* host, std::size_t count, std::size_t offset = 0) const {
    check_range(count, offset);
    copy_bytes(host, Device::Host, data_ + offset, device_, count * sizeof(T));
  }
  std::vector<T> host_copy() const {
    std::vector<T> out(size_);
    download(out.data(), size_);
    return out;
  }

  T* begin() { return host_data(); }
  T* end() { return host_data() + size_; }
  const T* begin() const { return host_data(); }
  const T* end() const { return host_data() + size_; }
  T& operator[](std::size_t i) { return host_data()[i]; }
  const T& operator[](std::size_t i) const { return host_data()[i]; }
  bool operator==(const DeviceArray& other) const { return host_copy() == other.host_copy(); }

 private:
  device_memory::Kind kind() const { return device_memory::kind_of(device_, pinned_); }
  // Room for n values, the first `keep` of them carried over when the block must grow.
  void reserve(std::size_t n, std::size_t keep) {
    if (n <= capacity_) return;
    T* grown = static_cast<T*>(device_memory::allocate(kind(), n * sizeof(T), "a device array"));
    copy_bytes(grown, device_, data_, device_, std::min(keep, size_) * sizeof(T));
    device_memory::release(kind(), data_, capacity_ * sizeof(T));
    data_ = grown;
    capacity_ = n;
  }
  T* host_data() const {
    SKEW_CHECK(device_ == Device::Host || size_ == 0,
               "element access to a " << device_name(device_) << " array: download it first");
    return data_;
  }
  void check_range(std::size_t count, std::size_t offset) const {
    SKEW_CHECK(offset + count <= size_,
               "copy of [" << offset << ", " << offset + count << ") out of a buffer of " << size_);
  }
  void swap(DeviceArray& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(pinned_, other.pinned_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  Device device_ = Device::Host;
  bool pinned_ = false;
  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace skew
