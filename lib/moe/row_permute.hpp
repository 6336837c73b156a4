// Moving token rows between the MoE layer's packed exchange buffers (rows grouped by source
// rank, then expert) and its expert-contiguous compute buffers, by a row map `pos`.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/moe_dispatch.hpp"

namespace skew::moe {

// out[pos[i]] = in[i] for n rows of `width`.
template <class T>
void scatter_rows_at(const T* in, const std::int64_t* pos, std::size_t n, int width, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::moe::scatter_rows(Device::Host, in, pos, static_cast<std::int64_t>(n), width, out);
  } else {
    for (std::size_t i = 0; i < n; ++i) std::copy(in + i * width, in + (i + 1) * width, out + pos[i] * width);
  }
}

// out[i] = in[pos[i]] for n rows of `width`.
template <class T>
void gather_rows_from(const T* in, const std::int64_t* pos, std::size_t n, int width, T* out) {
  for (std::size_t i = 0; i < n; ++i) std::copy(in + pos[i] * width, in + (pos[i] + 1) * width, out + i * width);
}

}  // namespace skew::moe
