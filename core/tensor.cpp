#include "core/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/bf16.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"

#ifdef SKEW_WITH_CUDA
#include "core/cuda_check.hpp"
#endif

namespace skew {

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64:
    case DType::F64: return 8;
    case DType::U8: return 1;
  }
  SKEW_THROW("unknown dtype");
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    if (n == dtype_name(d)) return d;
  SKEW_THROW("unsupported dtype '" << n << "' (supported: F32, F64, F16, BF16, I32, I64, U8)");
}

const char* device_name(Device d) {
  return d == Device::Host ? "host" : "cuda";
}

bool cuda_built() {
#ifdef SKEW_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef SKEW_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

std::uint16_t float_to_bf16(float f) {
  return bf16_bits_nearest_even(f);
}

float bf16_to_float(std::uint16_t b) {
  return float_of_bf16_bits(b);
}

float round_to_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
}

std::uint16_t float_to_f16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {                                                    // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14..24
    std::uint32_t h = mant >> (shift);
    const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = ((absx >> 13) - (112u << 10));
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // normalise a subnormal
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      u = sign | ((112u - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::size_t Tensor::numel() const {
  std::size_t n = 1;
  for (auto s : shape_) n *= static_cast<std::size_t>(s);
  return n;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << "[";
  for (std::size_t i = 0; i < shape_.size(); ++i) os << (i ? "," : "") << shape_[i];
  os << "]@" << device_name(device_);
  return os.str();
}

void Tensor::check_dtype(DType want) const {
  if (dtype_ == want) return;
  if (origin_.empty()) SKEW_THROW("tensor " << describe() << " accessed as " << dtype_name(want));
  SKEW_THROW(origin_ << " holds " << dtype_name(dtype_) << " values (" << describe() << "), but this run reads it as "
                     << dtype_name(want)
                     << ": the file was written by another version or with other settings, or was edited");
}

void Tensor::check_numel(std::size_t n) const {
  SKEW_CHECK(n == numel(), "tensor " << describe() << " holds " << numel() << " elements, given " << n);
}

namespace {
void require_cuda(const char* what) {
  if (!cuda_built())
    SKEW_THROW(
        what << ": this build of skew has no CUDA support (configure with -DSKEW_CUDA=ON on a machine with nvcc)");
  if (cuda_device_count() == 0) SKEW_THROW(what << ": no CUDA device is visible on this machine");
}
}  // namespace

Tensor Tensor::empty(std::vector<std::int64_t> shape, DType dtype, Device device) {
  Tensor t;
  for (auto s : shape) SKEW_CHECK(s >= 0, "negative dimension " << s);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  const std::size_t bytes = std::max<std::size_t>(t.nbytes(), 1);
  if (device == Device::Host) {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr)
      throw OutOfMemory("out of host memory allocating " + std::to_string(bytes) + " bytes for " + t.describe());
    t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  } else {
    require_cuda("allocating a CUDA tensor");
    void* p = device_memory::allocate(device_memory::Kind::Cuda, bytes, "a CUDA tensor");
    t.storage_ =
        std::shared_ptr<void>(p, [bytes](void* q) { device_memory::release(device_memory::Kind::Cuda, q, bytes); });
  }
  return t;
}

Tensor Tensor::zeros(std::vector<std::int64_t> shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  if (device == Device::Host) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
#ifdef SKEW_WITH_CUDA
    SKEW_CUDA_CHECK(cudaMemset(t.raw(), 0, t.nbytes()));
#endif
  }
  return t;
}

void Tensor::fill_zero() {
  SKEW_CHECK(defined(), "fill_zero of an undefined tensor");
  if (device_ == Device::Host) {
    std::memset(raw(), 0, nbytes());
    return;
  }
#ifdef SKEW_WITH_CUDA
  SKEW_CUDA_CHECK(cudaMemset(raw(), 0, nbytes()));
#endif
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::Host && src_device == Device::Host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  require_cuda("copying to or from CUDA memory");
#ifdef SKEW_WITH_CUDA
  SKEW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
#endif
}

Tensor Tensor::to(Device device) const {
  SKEW_CHECK(defined(), "copy of an undefined tensor");
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  SKEW_CHECK(src.shape_ == shape_, "copy_from shape mismatch: " << src.describe() << " into " << describe());
  if (src.dtype_ != dtype_) {
    SKEW_CHECK(device_ == Device::Host && src.device_ == Device::Host,
               "dtype conversion " << src.describe() << " -> " << describe() << " is host-only");
    const std::size_t n = numel();
    if (dtype_ == DType::F32) {
      const auto v = src.to_float_vector();
      std::copy(v.begin(), v.end(), data<float>());
    } else if ((dtype_ == DType::BF16 || dtype_ == DType::F16) && src.dtype_ == DType::F32) {
      auto* out = static_cast<std::uint16_t*>(raw());
      const float* in = src.data<float>();
      for (std::size_t i = 0; i < n; ++i) out[i] = dtype_ == DType::BF16 ? float_to_bf16(in[i]) : float_to_f16(in[i]);
    } else {
      SKEW_THROW("unsupported conversion " << src.describe() << " -> " << describe());
    }
    return;
  }
  if (device_ == Device::Host && src.device_ == Device::Host) {
    std::memcpy(raw(), src.raw(), nbytes());
    return;
  }
  require_cuda("copying a CUDA tensor");
#ifdef SKEW_WITH_CUDA
  SKEW_CUDA_CHECK(cudaMemcpy(raw(), src.raw(), nbytes(), cudaMemcpyDefault));
#endif
}

std::vector<float> Tensor::to_float_vector() const {
  SKEW_CHECK(device_ == Device::Host, "to_float_vector needs a host tensor, got " << describe());
  const std::size_t n = numel();
  std::vector<float> out(n);
  switch (dtype_) {
    case DType::F32: std::memcpy(out.data(), raw(), n * 4); break;
    case DType::F64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<const double*>(raw())[i]);
      break;
    case DType::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(static_cast<const std::uint16_t*>(raw())[i]);
      break;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_float(static_cast<const std::uint16_t*>(raw())[i]);
      break;
    case DType::I32:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<const std::int32_t*>(raw())[i]);
      break;
    case DType::I64:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<const std::int64_t*>(raw())[i]);
      break;
    case DType::U8:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<const std::uint8_t*>(raw())[i]);
      break;
  }
  return out;
}

}  // namespace skew
