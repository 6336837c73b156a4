// The MoE kernels that take a scalar type T run float on either device and float64 on the host
// only (the float64 layer is the reference the float one is tested against).
#pragma once
#include <type_traits>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

// Whether the call goes to the CUDA twin; float64 on Cuda is an error naming `what`.
template <typename T>
bool runs_on_cuda(Device device, const char* what) {
  if (device == Device::Host) return false;
  SKEW_CHECK((std::is_same_v<T, float>), what << ": float64 runs on the host only");
  return true;
}

}  // namespace skew::kernels::moe
