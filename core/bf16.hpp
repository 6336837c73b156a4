// bf16 storage conversion, one definition for the host and the device (SKEW_HD): the CPU twin and
// the CUDA kernel that round expert weights and activations to bf16 run the same body, so CPU
// tests cover the bit arithmetic the GPU runs.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

namespace skew {

SKEW_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

// Round to nearest even; a NaN stays a (quiet) NaN instead of rounding into infinity.
SKEW_HD inline std::uint16_t bf16_bits_nearest_even(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

SKEW_HD inline float float_of_bf16_bits(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

}  // namespace skew
