// The one choice by device every kernel entry point makes (kernels/cpu/<op>.cpp): a call on
// Device::Cuda goes to the op's CUDA twin (kernels/cuda/<op>.cu) and returns its result; a call on
// the host falls through to the CPU loop after it. In a build without CUDA the twins are not
// declared, and a CUDA call is refused with an error naming the op.
//   SKEW_ON_CUDA(device, "op", cuda::op(...));          any op
//   SKEW_ON_CUDA_FLOAT(T, device, "op", cuda::op(...));  an op templated on T: float on either
//                                                        device, float64 on the host only (the
//                                                        float64 layer is the float one's reference)
#pragma once
#include <type_traits>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew::kernels {

// Whether a T call goes to the CUDA twin; float64 on Cuda is an error naming `op`.
template <typename T>
bool runs_on_cuda(Device device, const char* op) {
  if (device == Device::Host) return false;
  SKEW_CHECK((std::is_same_v<T, float>), op << ": float64 runs on the host only");
  return true;
}

// The error for a CUDA call in a build without CUDA (or a check that must fail before any work).
[[noreturn]] inline void refuse_cuda(const char* op) {
  SKEW_THROW(op << " on CUDA in a build without CUDA");
}

}  // namespace skew::kernels

#if defined(SKEW_WITH_CUDA)
#define SKEW_ON_CUDA(device, op, call)    \
  if ((device) == ::skew::Device::Cuda) { \
    return call;                          \
  }
#define SKEW_ON_CUDA_FLOAT(T, device, op, call)       \
  if (::skew::kernels::runs_on_cuda<T>(device, op)) { \
    if constexpr (std::is_same_v<T, float>) call;     \
    return;                                           \
  }
#else
#define SKEW_ON_CUDA(device, op, call) \
  if ((device) == ::skew::Device::Cuda) ::skew::kernels::refuse_cuda(op)
#define SKEW_ON_CUDA_FLOAT(T, device, op, call) \
  if (::skew::kernels::runs_on_cuda<T>(device, op)) ::skew::kernels::refuse_cuda(op)
#endif
