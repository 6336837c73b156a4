// A typed array of T on one device (host or CUDA), over skew::Tensor: what the networks keep
// their parameters, gradients and activations in, so one chain of lib/moe/ops runs on whichever
// device the network was built for. Host buffers also read and write element-wise (host code and
// tests); a device buffer moves only through upload/download and the ops.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew::moe {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(Device device = Device::Host) : device_(device) {}
  // Moved, never copied: a copy would share the storage (Tensor's), an alias no caller expects.
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&&) noexcept = default;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept = default;
  Device device() const { return device_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ ? tensor_.template data<T>() : nullptr; }
  const T* data() const { return size_ ? tensor_.template data<T>() : nullptr; }

  // Holds `count` values: a fresh zero-filled allocation only when the count changes, so a step
  // loop of steady shapes allocates nothing (the old values stay; every user overwrites them).
  void resize(std::size_t count) {
    if (count == size_ && tensor_.defined()) return;
    tensor_ = Tensor::zeros({static_cast<std::int64_t>(count)}, dtype_of<T>(), device_);
    size_ = count;
  }
  void zero() {
    if (tensor_.defined()) tensor_.fill_zero();
  }
  // A copy of `src` (same device): an activation kept for the backward.
  void assign(const DeviceBuffer& src) {
    resize(src.size());
    copy_bytes(data(), device_, src.data(), src.device(), size_ * sizeof(T));
  }
  // count host values into [offset, offset + count), and back.
  void upload(const T* host, std::size_t count, std::size_t offset = 0) {
    check_range(count, offset);
    copy_bytes(data() + offset, device_, host, Device::Host, count * sizeof(T));
  }
  void download(T* host, std::size_t count, std::size_t offset = 0) const {
    check_range(count, offset);
    copy_bytes(host, Device::Host, data() + offset, device_, count * sizeof(T));
  }
  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    download(out.data(), size_);
    return out;
  }

  // Host buffers only.
  T* begin() { return host_data(); }
  T* end() { return host_data() + size_; }
  const T* begin() const { return host_data(); }
  const T* end() const { return host_data() + size_; }
  T& operator[](std::size_t i) { return host_data()[i]; }
  const T& operator[](std::size_t i) const { return host_data()[i]; }
  bool operator==(const DeviceBuffer& other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
  }

 private:
  T* host_data() const {
    SKEW_CHECK(device_ == Device::Host || size_ == 0,
               "element access to a " << device_name(device_) << " buffer: download it first");
    return size_ ? const_cast<T*>(tensor_.template data<T>()) : nullptr;
  }
  void check_range(std::size_t count, std::size_t offset) const {
    SKEW_CHECK(offset + count <= size_,
               "copy of [" << offset << ", " << offset + count << ") out of a buffer of " << size_);
  }
  Device device_;
  std::size_t size_ = 0;
  Tensor tensor_;
};

}  // namespace skew::moe
