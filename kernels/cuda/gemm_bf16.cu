// Mixed-precision GEMM on the GPU: both operands are converted to bf16 (round to nearest even)
// into device scratch, then cublasGemmEx multiplies them on the tensor cores with fp32
// accumulation into the fp32 C. Row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T
// (operands swap, transposes stay), as in gemm.cpp.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/gemm.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels::cuda {
namespace {

constexpr int kBlock = 256;

__global__ void to_bf16(const float* in, std::int64_t n, __nv_bfloat16* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

// Grow-only device buffer per calling thread, so per-layer GEMMs do not cudaMalloc every call.
struct Bf16Scratch {
  __nv_bfloat16* ptr = nullptr;
  std::size_t capacity = 0;
  ~Bf16Scratch() { cudaFree(ptr); }
  __nv_bfloat16* reserve(std::size_t count) {
    if (count > capacity) {
      SKEW_CUDA_CHECK(cudaFree(ptr));
      ptr = nullptr;
      SKEW_CUDA_CHECK(cudaMalloc(&ptr, count * sizeof(__nv_bfloat16)));
      capacity = count;
    }
    return ptr;
  }
};

// The span a rows x cols matrix with row stride ld occupies, converted as one range so the copy
// keeps the caller's stride.
__nv_bfloat16* converted(const float* src, int rows, int cols, int ld, Bf16Scratch& scratch) {
  const std::int64_t span = rows == 0 ? 0 : static_cast<std::int64_t>(rows - 1) * ld + cols;
  __nv_bfloat16* out = scratch.reserve(static_cast<std::size_t>(span));
  if (span > 0) {
    to_bf16<<<static_cast<int>((span + kBlock - 1) / kBlock), kBlock>>>(src, span, out);
    SKEW_CUDA_CHECK(cudaGetLastError());
  }
  return out;
}

}  // namespace

void gemm_bf16(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  thread_local Bf16Scratch a_scratch, b_scratch;
  const __nv_bfloat16* a16 = converted(a, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, a_scratch);
  const __nv_bfloat16* b16 = converted(b, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, b_scratch);
  SKEW_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b16, CUDA_R_16BF, s.ldb,
                                 a16, CUDA_R_16BF, s.lda, &beta, c, CUDA_R_32F, s.ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace skew::kernels::cuda
