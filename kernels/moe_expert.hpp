// Expert FFN GEMMs for all local experts in one call. Rows are expert-contiguous: group g (an
// expert) owns rows [offsets[g], offsets[g+1]) of the row operands; its weight is b[g] (or its
// gradient c[g]). `offsets` and the pointer arrays live on the host; every matrix on `device`.
// Groups with no rows are skipped (no launch).
//
// Three shapes, one entry point each, so the MoE layer runs its experts the same way on either
// device:
//   rows         c_g = a_g op(b[g]) + beta c_g    forward (x W1, h W2) and backward (dy W2^T, dh W1^T)
//   weight grads c[g] += a_g^T b_g                  dW1 += x^T dhpre, dW2 += h^T dy
// fp32 operands run kernels::gemm per group (OpenBLAS or cuBLAS), so the host values are those of
// a per-expert loop bit for bit. Mixed precision rounds inputs to bf16 and accumulates in fp32;
// its rows form takes operands already rounded (bf16 bits, as to_bf16_bits writes them): a
// trainer rounds its fp32 master weights once after each optimizer step and its activations once
// per layer call, which is how mixed-precision frameworks keep weight copies. grouped_gemm_bf16
// takes fp32 operands and rounds them inside every call (the baseline moe_gpu_bench compares).
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace skew::kernels::moe {

void grouped_gemm(Device device, int groups, const std::int64_t* offsets, bool trans_b, int n, int k, const float* a,
                  const float* const* b, float beta, float* c);

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c);

// out[i] = in[i] rounded to the nearest bf16 (even on ties), as bits; in and out on `device`.
void to_bf16_bits(Device device, const float* in, std::int64_t count, std::uint16_t* out);

// b[g] is [k, n], or [n, k] when trans_b.
void grouped_gemm_bf16_operands(Device device, int groups, const std::int64_t* offsets, bool trans_b, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float beta, float* c);
inline void grouped_gemm_bf16_operands(Device device, int groups, const std::int64_t* offsets, int n, int k,
                                       const std::uint16_t* a, const std::uint16_t* const* b, float* c) {
  grouped_gemm_bf16_operands(device, groups, offsets, false, n, k, a, b, 0.f, c);
}

// a [rows, m], b [rows, n], c[g] [m, n]; bf16: inputs rounded to bf16 inside the call (both are
// activations, read once).
void grouped_gemm_weight_grads(Device device, bool bf16, int groups, const std::int64_t* offsets, int m, int n,
                               const float* a, const float* b, float* const* c);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void to_bf16_bits(const float* in, std::int64_t count, std::uint16_t* out);
void grouped_gemm_bf16_operands(int groups, const std::int64_t* offsets, bool trans_b, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float beta, float* c);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
