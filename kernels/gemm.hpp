// Dense single-precision GEMM on row-major matrices, CPU (OpenBLAS) and CUDA (cuBLAS) behind
// one call: C = alpha * op(A) * op(B) + beta * C with op(X) = X or X^T. A is m x k after op,
// B is k x n after op, C is m x n; ld* are row strides in elements.
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace skew::kernels {

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;  // 0 = packed (the natural row stride)
};

void gemm(Device device, const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c);
// The same product in mixed precision, as GPU tensor cores compute it: A and B rounded to bf16
// (nearest even), products accumulated in fp32, C in fp32. CUDA: cublasGemmEx on bf16 copies.
// CPU: the AVX512-BF16 kernel where the CPU has it, else SGEMM on rounded fp32 copies (same
// numerics up to accumulation order, slower than plain fp32).
void gemm_bf16(Device device, const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
               float* c);
// `count` products of one shape, matrix i's operands at a + i * strides.a, b + i * strides.b and
// c + i * strides.c (elements): attention's per-head GEMMs, whose operands are column blocks of
// one row-major buffer (ld wider than the block, stride = the block's width). CUDA: one
// cublas*StridedBatched call; host: the twin loops gemm / gemm_bf16 over the batch, so each
// matrix is exactly what the single call computes.
struct BatchStrides {
  std::int64_t a = 0, b = 0, c = 0;
  int count = 1;
};
void gemm_strided_batched(Device device, const GemmShape& shape, float alpha, const float* a, const float* b,
                          float beta, float* c, const BatchStrides& strides);
void gemm_bf16_strided_batched(Device device, const GemmShape& shape, float alpha, const float* a, const float* b,
                               float beta, float* c, const BatchStrides& strides);
// Which CPU path gemm_bf16 takes on this machine, in words (for the apps' logs).
const char* gemm_bf16_host_path();
// Float64 reference (naive triple loop) used by tests to check both backends.
void gemm_reference(const GemmShape& shape, double alpha, const float* a, const float* b, double beta, double* c);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void gemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c);
void gemm_bf16(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c);
void gemm_strided_batched(const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c,
                          const BatchStrides& strides);
void gemm_bf16_strided_batched(const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
                               float* c, const BatchStrides& strides);
}  // namespace cuda
#endif

}  // namespace skew::kernels
