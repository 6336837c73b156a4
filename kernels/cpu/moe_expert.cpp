#include "kernels/moe_expert.hpp"

#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/gemm.hpp"

namespace skew::kernels::moe {
namespace {

// Group g's rows as a GEMM shape: m = its row count, c_g = a_g op(b) over k.
GemmShape group_shape(std::int64_t rows, bool trans_b, int n, int k) {
  GemmShape s;
  s.trans_b = trans_b, s.m = static_cast<int>(rows), s.n = n, s.k = k;
  return s;
}

}  // namespace

void grouped_gemm(Device device, int groups, const std::int64_t* offsets, bool trans_b, int n, int k, const float* a,
                  const float* const* b, float beta, float* c) {
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    gemm(device, group_shape(rows, trans_b, n, k), 1.f, a + offsets[g] * k, b[g], beta, c + offsets[g] * n);
  }
}

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c) {
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    gemm_bf16(device, group_shape(rows, false, n, k), 1.f, a + offsets[g] * k, b[g], 0.f, c + offsets[g] * n);
  }
}

void to_bf16_bits(Device device, const float* in, std::int64_t count, std::uint16_t* out) {
  SKEW_ON_CUDA(device, "bf16 rounding", cuda::to_bf16_bits(in, count, out));
  for (std::int64_t i = 0; i < count; ++i) out[i] = bf16_bits_nearest_even(in[i]);
}

void grouped_gemm_bf16_operands(Device device, int groups, const std::int64_t* offsets, bool trans_b, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float beta, float* c) {
  SKEW_ON_CUDA(device, "grouped bf16 GEMM",
               cuda::grouped_gemm_bf16_operands(groups, offsets, trans_b, n, k, a, b, beta, c));
  // The CPU twin widens the bf16 operands (exactly) and multiplies them with gemm_bf16, whose
  // rounding to bf16 leaves them unchanged: the same product as the GPU's. Scratch is kept per
  // thread, as gemm_bf16's own, so the layer's calls do not allocate.
  thread_local std::vector<float> a32, b32;
  const auto widen = [](const std::uint16_t* bits, std::size_t count, std::vector<float>& out) {
    if (out.size() < count) out.resize(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = float_of_bf16_bits(bits[i]);
  };
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    widen(a + offsets[g] * k, static_cast<std::size_t>(rows) * static_cast<std::size_t>(k), a32);
    widen(b[g], static_cast<std::size_t>(k) * static_cast<std::size_t>(n), b32);
    gemm_bf16(Device::Host, group_shape(rows, trans_b, n, k), 1.f, a32.data(), b32.data(), beta, c + offsets[g] * n);
  }
}

void grouped_gemm_weight_grads(Device device, bool bf16, int groups, const std::int64_t* offsets, int m, int n,
                               const float* a, const float* b, float* const* c) {
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    GemmShape s;
    s.trans_a = true, s.m = m, s.n = n, s.k = static_cast<int>(rows);
    const float* a_g = a + offsets[g] * m;
    const float* b_g = b + offsets[g] * n;
    if (bf16)
      gemm_bf16(device, s, 1.f, a_g, b_g, 1.f, c[g]);
    else
      gemm(device, s, 1.f, a_g, b_g, 1.f, c[g]);
  }
}

}  // namespace skew::kernels::moe
