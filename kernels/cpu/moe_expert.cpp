#include "kernels/moe_expert.hpp"

#include <vector>

#include "kernels/gemm.hpp"
#include "lib/core/bf16.hpp"
#include "lib/core/error.hpp"

namespace skew::kernels::moe {

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c) {
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    GemmShape s;
    s.m = static_cast<int>(rows), s.n = n, s.k = k;
    gemm_bf16(device, s, 1.f, a + offsets[g] * k, b[g], 0.f, c + offsets[g] * n);
  }
}

void to_bf16_bits(Device device, const float* in, std::int64_t count, std::uint16_t* out) {
  if (device == Device::Cuda) return cuda::to_bf16_bits(in, count, out);
  for (std::int64_t i = 0; i < count; ++i) out[i] = bf16_bits_nearest_even(in[i]);
}

void grouped_gemm_bf16_operands(Device device, int groups, const std::int64_t* offsets, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float* c) {
  if (device == Device::Cuda) return cuda::grouped_gemm_bf16_operands(groups, offsets, n, k, a, b, c);
  // The CPU twin widens the bf16 operands (exactly) and multiplies them with the fp32-operand
  // path, whose rounding to bf16 leaves them unchanged: the same product as the GPU's.
  const auto widen = [](const std::uint16_t* bits, std::size_t count) {
    std::vector<float> out(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = float_of_bf16_bits(bits[i]);
    return out;
  };
  const std::vector<float> a32 = widen(a, static_cast<std::size_t>(offsets[groups]) * static_cast<std::size_t>(k));
  std::vector<std::vector<float>> b32;
  std::vector<const float*> b_ptrs;
  for (int g = 0; g < groups; ++g) {
    b32.push_back(widen(b[g], static_cast<std::size_t>(k) * static_cast<std::size_t>(n)));
    b_ptrs.push_back(b32.back().data());
  }
  grouped_gemm_bf16(Device::Host, groups, offsets, n, k, a32.data(), b_ptrs.data(), c);
}

#ifndef SKEW_WITH_CUDA
namespace cuda {
void to_bf16_bits(const float*, std::int64_t, std::uint16_t*) {
  SKEW_THROW("bf16 rounding on CUDA in a build without CUDA");
}
void grouped_gemm_bf16_operands(int, const std::int64_t*, int, int, const std::uint16_t*, const std::uint16_t* const*,
                                float*) {
  SKEW_THROW("grouped bf16 GEMM on CUDA in a build without CUDA");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
