// Storage of the MoE layer's data plane on the layer's device (MoeOptions::device): a
// std::vector on the host, device memory on a GPU, behind one interface, so that the layer's
// forward and backward run the same code on either. Device storage grows only (a steady step
// loop allocates nothing); copies go through cudaMemcpy with the default stream's ordering, as
// the kernels of kernels/moe_*.hpp run on it. Element access is host-only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "mpi/process_group.hpp"

namespace skew::moe {

namespace device_memory {
// Raw device memory (CUDA builds; elsewhere they throw, naming `what`).
void* allocate(std::size_t bytes, const char* what);
void release(void* p);
void zero(void* p, std::size_t bytes);
// Any direction when `device` is Cuda (unified addressing: host or device pointers on either
// side); a plain memcpy when Host.
void copy(void* dst, const void* src, std::size_t bytes, Device device);
}  // namespace device_memory

template <class T>
class LayerBuffer {
 public:
  explicit LayerBuffer(Device device = Device::Host) : device_(device) {}
  LayerBuffer(const LayerBuffer& other) : device_(other.device_) { assign_from(other.data(), other.size()); }
  LayerBuffer& operator=(const LayerBuffer& other) {
    if (this != &other) {
      set_device(other.device_);
      assign_from(other.data(), other.size());
    }
    return *this;
  }
  ~LayerBuffer() { device_memory::release(device_data_); }

  Device device() const { return device_; }
  // Drops the contents when the device changes.
  void set_device(Device device) {
    if (device == device_) return;
    clear();
    device_ = device;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return device_ == Device::Host ? host_.data() : device_data_; }
  const T* data() const { return device_ == Device::Host ? host_.data() : device_data_; }
  comm::Buffer view() { return comm::view(data(), size_, device_); }

  // n elements, contents undefined on the device (kept on the host, as std::vector::resize).
  void resize(std::size_t n) {
    if (device_ == Device::Host) {
      host_.resize(n);
    } else if (n > capacity_) {
      device_memory::release(device_data_);
      device_data_ = static_cast<T*>(device_memory::allocate(n * sizeof(T), "an MoE layer buffer"));
      capacity_ = n;
    }
    size_ = n;
  }
  // n zeros.
  void zeros(std::size_t n) {
    if (device_ == Device::Host) {
      host_.assign(n, T(0));
      size_ = n;
      return;
    }
    resize(n);
    device_memory::zero(device_data_, n * sizeof(T));
  }
  // n elements copied from src, on the host or the device.
  void assign_from(const T* src, std::size_t n) {
    resize(n);
    if (n > 0) device_memory::copy(data(), src, n * sizeof(T), device_);
  }
  void assign_from(const std::vector<T>& src) { assign_from(src.data(), src.size()); }
  std::vector<T> host_copy() const {
    std::vector<T> out(size_);
    if (size_ > 0) device_memory::copy(out.data(), data(), size_ * sizeof(T), device_);
    return out;
  }
  void clear() {
    host_.clear();
    size_ = 0;
  }

  T* begin() { return host_.data() + host_index(0); }
  T* end() { return host_.data() + host_index(size_); }
  const T* begin() const { return host_.data() + host_index(0); }
  const T* end() const { return host_.data() + host_index(size_); }
  T& operator[](std::size_t i) { return host_[host_index(i)]; }
  const T& operator[](std::size_t i) const { return host_[host_index(i)]; }
  bool operator==(const LayerBuffer& other) const { return host_copy() == other.host_copy(); }

 private:
  std::size_t host_index(std::size_t i) const {
    SKEW_CHECK(device_ == Device::Host, "host access to an MoE layer buffer on " << device_name(device_));
    return i;
  }
  Device device_;
  std::vector<T> host_;
  T* device_data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace skew::moe
