// Moving token rows between the MoE layer's packed exchange buffers (rows grouped by source
// rank, then expert) and its expert-contiguous compute buffers, by a row map `pos`, on the
// device the pointers live on (float; double on the host).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_route.hpp"

namespace skew::moe {

// out[pos[i]] = in[i] for n rows of `width`.
template <class T>
void scatter_rows_at(const T* in, const std::int64_t* pos, std::size_t n, int width, T* out,
                     Device device = Device::Host) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::moe::scatter_rows(device, in, pos, static_cast<std::int64_t>(n), width, out);
  } else {
    SKEW_CHECK(device == Device::Host, "float64 rows are permuted on the host only");
    for (std::size_t i = 0; i < n; ++i) std::copy(in + i * width, in + (i + 1) * width, out + pos[i] * width);
  }
}

// out[i] = in[pos[i]] for n rows of `width`.
template <class T>
void gather_rows_from(const T* in, const std::int64_t* pos, std::size_t n, int width, T* out,
                      Device device = Device::Host) {
  kernels::moe::gather_rows(device, static_cast<std::int64_t>(n), width, pos, in, out);
}

}  // namespace skew::moe
