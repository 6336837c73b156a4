#include "kernels/gemm.hpp"

#include <cblas.h>

#include "lib/core/error.hpp"

namespace skew::kernels {
namespace {
GemmShape packed(GemmShape s) {
  if (!s.lda) s.lda = s.trans_a ? s.m : s.k;
  if (!s.ldb) s.ldb = s.trans_b ? s.k : s.n;
  if (!s.ldc) s.ldc = s.n;
  return s;
}
}  // namespace

void gemm(Device device, const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c) {
  const GemmShape s = packed(shape);
  SKEW_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0, "gemm: negative dimension");
  if (s.m == 0 || s.n == 0) return;
  if (device == Device::Cuda) {
    SKEW_CHECK(cuda_built(), "gemm on a CUDA device in a build without CUDA");
    cuda::gemm(s, alpha, a, b, beta, c);
    return;
  }
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k,
              alpha, a, s.lda, b, s.ldb, beta, c, s.ldc);
}

void gemm_reference(const GemmShape& shape, double alpha, const float* a, const float* b, double beta, double* c) {
  const GemmShape s = packed(shape);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int p = 0; p < s.k; ++p) {
        const double av = s.trans_a ? a[p * s.lda + i] : a[i * s.lda + p];
        const double bv = s.trans_b ? b[j * s.ldb + p] : b[p * s.ldb + j];
        acc += av * bv;
      }
      c[i * s.ldc + j] = alpha * acc + beta * c[i * s.ldc + j];
    }
}

#ifndef SKEW_WITH_CUDA
namespace cuda {
void gemm(const GemmShape&, float, const float*, const float*, float, float*) {
  SKEW_THROW("gemm on a CUDA device: this build of skew has no CUDA support");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels
