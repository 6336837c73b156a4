// Shared by lib/moe/ops.cpp and ops_attention.cpp: the host-only check of the float64
// references, and scratch memory on the device an op's operands live on (attention backward's
// score gradients, cross-entropy's per-row losses).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace skew::moe {

inline void require_host_reference(Device device, const char* op) {
  SKEW_CHECK(device == Device::Host, op << ": the float64 reference runs on the host only (the float path runs on "
                                        << device_name(device) << ")");
}

// `slot` holding exactly `count` elements of `dtype` on `device`, reallocated only when one of
// them changes: callers keep one thread_local slot each, so a step loop of steady shapes
// allocates nothing after its first step (cudaMalloc synchronises the device).
inline Tensor& scratch_of(Tensor& slot, std::size_t count, DType dtype, Device device) {
  if (!slot.defined() || slot.numel() != count || slot.dtype() != dtype || slot.device() != device)
    slot = Tensor::empty({static_cast<std::int64_t>(count)}, dtype, device);
  return slot;
}

}  // namespace skew::moe
