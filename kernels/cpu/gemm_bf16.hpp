// The two CPU paths of kernels::gemm_bf16 (private to kernels/cpu; callers use kernels::gemm_bf16,
// which takes the native kernel where the CPU has it).
//
// Native bf16 GEMM for CPUs with AVX512-BF16 (vdpbf16ps): A and B are rounded to bf16 (nearest
// even, vcvtne2ps2bf16) while they are packed into panels, and products are accumulated in fp32, so
// the result equals an fp32 GEMM of the rounded inputs up to accumulation order. Both instructions
// treat denormal inputs as zero (and vdpbf16ps flushes denormal results to zero), so inputs below
// 2^-126 in magnitude become 0 where float_to_bf16 would keep a bf16 denormal; NaN stays NaN.
// Single-threaded: ranks are the parallelism in skew's apps. On moe_train's shapes it runs
// 1.7-2.1x OpenBLAS's AVX-512 SGEMM on one Zen 5 core (results/gemm/bf16_gemm).
//
// Portable path: A and B rounded (float_to_bf16) into fp32 copies, then OpenBLAS SGEMM. Same
// numerics up to accumulation order and denormals, slower than a plain fp32 GEMM.
#pragma once
#include "kernels/gemm.hpp"

namespace skew::kernels::cpu {

// Whether this CPU executes AVX512-BF16 (checked once, at run time).
bool has_avx512_bf16();

// C = alpha * op(A) op(B) + beta * C on a packed shape (lda, ldb, ldc all set). Requires
// has_avx512_bf16().
void gemm_bf16_avx512(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c);

// The same product on any CPU, on a packed shape.
void gemm_bf16_rounded_sgemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c);

}  // namespace skew::kernels::cpu
