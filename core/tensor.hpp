// A dense tensor with a device tag (host or CUDA), shape and dtype, backed by shared storage (CUDA
// storage from the caching allocator of core/device_memory.hpp): the checkpoint and safetensors
// tensor; the data plane's arrays are DeviceArrays (core/device_array.hpp).
// Copies between devices go through Tensor::to / copy_from. On a build without CUDA, or a
// machine without a GPU, asking for a CUDA tensor throws skew::Error saying which.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace skew {

enum class Device { Host, Cuda };
enum class DType { F32, F64, F16, BF16, I32, I64, U8 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors spelling: F32, F64, F16, BF16, I32, I64, U8
DType dtype_from_name(const std::string& name);
const char* device_name(Device device);

// Number of usable CUDA devices: 0 on a build without CUDA or a machine without a GPU.
int cuda_device_count();
bool cuda_built();

// Storage conversions for half types (round to nearest even).
std::uint16_t float_to_bf16(float f);
float bf16_to_float(std::uint16_t b);
// f rounded to the nearest bf16 and widened back: the value a bf16 operand carries.
float round_to_bf16(float f);
std::uint16_t float_to_f16(float f);
float f16_to_float(std::uint16_t h);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::U8;
}

// `bytes` from src (on src_device) to dst (on dst_device): a memcpy on the host, cudaMemcpy
// otherwise (synchronous); for a part of a tensor, which Tensor::copy_from cannot address.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(std::vector<std::int64_t> shape, DType dtype, Device device = Device::Host);
  static Tensor zeros(std::vector<std::int64_t> shape, DType dtype, Device device = Device::Host);
  template <typename T, typename Alloc>
  static Tensor from_vector(const std::vector<T, Alloc>& values, std::vector<std::int64_t> shape) {
    Tensor t = empty(std::move(shape), dtype_of<T>());
    t.check_numel(values.size());
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  // Copy to `device` (a new tensor; same dtype and shape).
  Tensor to(Device device) const;
  // Element-wise copy of same-shaped `src`, any devices; converts F32 <-> F16/BF16 on host.
  void copy_from(const Tensor& src);
  Tensor clone() const { return to(device_); }
  // Zeroes every byte in place on the tensor's device (no allocation: a step loop's reset).
  void fill_zero();
  // Host-only conversion of the values to float (F32/F16/BF16/I32/I64/U8).
  std::vector<float> to_float_vector() const;

  template <typename T>
  T* data() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(raw());
  }
  void* raw() { return static_cast<char*>(storage_.get()) + offset_; }
  const void* raw() const { return static_cast<const char*>(storage_.get()) + offset_; }

  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  std::size_t numel() const;
  std::size_t nbytes() const { return numel() * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return storage_ != nullptr; }
  std::string describe() const;  // "f32[4,8]@host"
  // Where the tensor was read from ("tensor 'w' of FILE"; empty for one made in memory), so that
  // reading it as another dtype names the tensor and the file, not only the two dtypes.
  void set_origin(std::string origin) { origin_ = std::move(origin); }
  const std::string& origin() const { return origin_; }

 private:
  void check_dtype(DType want) const;
  void check_numel(std::size_t n) const;
  std::shared_ptr<void> storage_;
  std::size_t offset_ = 0;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::Host;
  std::string origin_;
};

}  // namespace skew
