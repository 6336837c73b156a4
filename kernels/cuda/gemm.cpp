// cuBLAS is column-major: a row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T, i.e. the operands swap and the transposes stay as given.
#include "kernels/gemm.hpp"

#include <cublas_v2.h>

#include "core/cuda_check.hpp"
#include "kernels/cuda/cublas_handle.hpp"

namespace skew::kernels::cuda {
cublasHandle_t cublas_handle() {
  thread_local cublasHandle_t h = [] {
    cublasHandle_t created;
    SKEW_CUBLAS_CHECK(cublasCreate(&created));
    return created;
  }();
  return h;
}

void gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  SKEW_CUBLAS_CHECK(cublasSgemm(cublas_handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b, s.ldb, a, s.lda, &beta,
                                c, s.ldc));
}

void gemm_strided_batched(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c,
                          const BatchStrides& strides) {
  SKEW_CUBLAS_CHECK(cublasSgemmStridedBatched(
      cublas_handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k,
      &alpha, b, s.ldb, strides.b, a, s.lda, strides.a, &beta, c, s.ldc, strides.c, strides.count));
}

}  // namespace skew::kernels::cuda
