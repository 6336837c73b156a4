// cuBLAS is column-major: a row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T, i.e. the operands swap and the transposes stay as given.
#include <cublas_v2.h>

#include "kernels/gemm.hpp"
#include "lib/core/cuda_check.hpp"

namespace skew::kernels::cuda {
namespace {
cublasHandle_t handle() {
  thread_local cublasHandle_t h = [] {
    cublasHandle_t created;
    SKEW_CUBLAS_CHECK(cublasCreate(&created));
    return created;
  }();
  return h;
}
}  // namespace

void gemm(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  SKEW_CUBLAS_CHECK(cublasSgemm(handle(), s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.n,
                                s.m, s.k, &alpha, b, s.ldb, a, s.lda, &beta, c, s.ldc));
}

}  // namespace skew::kernels::cuda
