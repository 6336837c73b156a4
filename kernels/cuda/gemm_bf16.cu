// Mixed-precision GEMM on the GPU: both operands are converted to bf16 (round to nearest even)
// into device scratch, then cublasGemmEx multiplies them on the tensor cores with fp32
// accumulation into the fp32 C. Row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T
// (operands swap, transposes stay), as in gemm.cpp.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>

#include "core/cuda_check.hpp"
#include "core/device_array.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/gemm.hpp"

namespace skew::kernels::cuda {
namespace {

constexpr int kBlock = 256;
constexpr std::int64_t kMaxGrid = 1 << 16;

// Grid-stride, so a span of any 64-bit length converts with a grid that fits an int.
__global__ void to_bf16(const float* in, std::int64_t n, __nv_bfloat16* out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __float2bfloat16_rn(in[i]);
}

// Grow-only device buffer per calling thread, so per-layer GEMMs do not cudaMalloc every call.
using Bf16Scratch = DeviceArray<__nv_bfloat16>;

// `span` floats from src converted as one range, so the copy keeps the caller's strides.
__nv_bfloat16* converted_span(const float* src, std::int64_t span, Bf16Scratch& scratch) {
  scratch.resize_for_overwrite(static_cast<std::size_t>(span));
  __nv_bfloat16* out = scratch.data();
  if (span > 0) {
    const int grid = static_cast<int>(std::min<std::int64_t>((span + kBlock - 1) / kBlock, kMaxGrid));
    to_bf16<<<grid, kBlock>>>(src, span, out);
    SKEW_CUDA_CHECK(cudaGetLastError());
  }
  return out;
}

// The elements `count` rows x cols matrices with row stride ld, `stride` apart, span: from the
// first one's start to the last one's end.
std::int64_t matrices_span(int rows, int cols, int ld, std::int64_t stride = 0, int count = 1) {
  if (rows == 0 || count == 0) return 0;
  return static_cast<std::int64_t>(rows - 1) * ld + cols + static_cast<std::int64_t>(count - 1) * stride;
}

__nv_bfloat16* converted(const float* src, int rows, int cols, int ld, Bf16Scratch& scratch) {
  return converted_span(src, matrices_span(rows, cols, ld), scratch);
}

}  // namespace

void gemm_bf16(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  thread_local Bf16Scratch a_scratch(Device::Cuda), b_scratch(Device::Cuda);
  const __nv_bfloat16* a16 = converted(a, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, a_scratch);
  const __nv_bfloat16* b16 = converted(b, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, b_scratch);
  SKEW_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b16, CUDA_R_16BF, s.ldb,
                                 a16, CUDA_R_16BF, s.lda, &beta, c, CUDA_R_32F, s.ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

// The batch's operands as one converted span each (from the first matrix's start to the last
// one's end), so that the caller's ld and batch strides still address them.
void gemm_bf16_strided_batched(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
                               const BatchStrides& strides) {
  thread_local Bf16Scratch a_scratch(Device::Cuda), b_scratch(Device::Cuda);
  const int a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  const __nv_bfloat16* a16 =
      converted_span(a, matrices_span(a_rows, a_cols, s.lda, strides.a, strides.count), a_scratch);
  const __nv_bfloat16* b16 =
      converted_span(b, matrices_span(b_rows, b_cols, s.ldb, strides.b, strides.count), b_scratch);
  SKEW_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k,
      &alpha, b16, CUDA_R_16BF, s.ldb, strides.b, a16, CUDA_R_16BF, s.lda, strides.a, &beta, c, CUDA_R_32F, s.ldc,
      strides.c, strides.count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace skew::kernels::cuda
