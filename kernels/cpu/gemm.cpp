#include "kernels/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/gemm_bf16.hpp"
#include "kernels/dispatch.hpp"

namespace skew::kernels {
namespace {
// BLAS wants every leading dimension >= 1, even for an empty matrix (k = 0).
GemmShape packed(GemmShape s) {
  if (!s.lda) s.lda = std::max(1, s.trans_a ? s.m : s.k);
  if (!s.ldb) s.ldb = std::max(1, s.trans_b ? s.k : s.n);
  if (!s.ldc) s.ldc = std::max(1, s.n);
  return s;
}
}  // namespace

void gemm(Device device, const GemmShape& shape, float alpha, const float* a, const float* b, float beta, float* c) {
  const GemmShape s = packed(shape);
  SKEW_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0, "gemm: negative dimension");
  if (s.m == 0 || s.n == 0) return;
  SKEW_ON_CUDA(device, "gemm", cuda::gemm(s, alpha, a, b, beta, c));
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n,
              s.k, alpha, a, s.lda, b, s.ldb, beta, c, s.ldc);
}

namespace {
// The rows x cols matrix at `src` (row stride ld), rounded to bf16 and widened back, packed.
const float* rounded_copy(const float* src, int rows, int cols, int ld, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(rows) * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      out[static_cast<std::size_t>(i) * cols + j] = round_to_bf16(src[static_cast<std::size_t>(i) * ld + j]);
  return out.data();
}
}  // namespace

namespace cpu {
void gemm_bf16_rounded_sgemm(const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
                             float* c) {
  GemmShape s = shape;
  thread_local std::vector<float> a_rounded, b_rounded;
  const int a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  a = rounded_copy(a, a_rows, a_cols, s.lda, a_rounded);
  b = rounded_copy(b, b_rows, b_cols, s.ldb, b_rounded);
  s.lda = std::max(1, a_cols);
  s.ldb = std::max(1, b_cols);
  gemm(Device::Host, s, alpha, a, b, beta, c);
}
}  // namespace cpu

void gemm_bf16(Device device, const GemmShape& shape, float alpha, const float* a, const float* b, float beta,
               float* c) {
  const GemmShape s = packed(shape);
  SKEW_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0, "gemm_bf16: negative dimension");
  if (s.m == 0 || s.n == 0) return;
  SKEW_ON_CUDA(device, "gemm_bf16", cuda::gemm_bf16(s, alpha, a, b, beta, c));
  if (cpu::has_avx512_bf16())
    cpu::gemm_bf16_avx512(s, alpha, a, b, beta, c);
  else
    cpu::gemm_bf16_rounded_sgemm(s, alpha, a, b, beta, c);
}

namespace {
// The checks both devices share; false when there is nothing to compute.
bool nonempty_batch(Device device, const GemmShape& s, const BatchStrides& strides) {
  SKEW_CHECK(s.m >= 0 && s.n >= 0 && s.k >= 0 && strides.count >= 0, "strided-batched gemm: negative dimension");
  if (device == Device::Cuda && !cuda_built()) refuse_cuda("strided-batched gemm");
  return s.m > 0 && s.n > 0 && strides.count > 0;
}
}  // namespace

void gemm_strided_batched(Device device, const GemmShape& shape, float alpha, const float* a, const float* b,
                          float beta, float* c, const BatchStrides& strides) {
  const GemmShape s = packed(shape);
  if (!nonempty_batch(device, s, strides)) return;
  SKEW_ON_CUDA(device, "strided-batched gemm", cuda::gemm_strided_batched(s, alpha, a, b, beta, c, strides));
  for (int i = 0; i < strides.count; ++i)
    gemm(Device::Host, s, alpha, a + i * strides.a, b + i * strides.b, beta, c + i * strides.c);
}

void gemm_bf16_strided_batched(Device device, const GemmShape& shape, float alpha, const float* a, const float* b,
                               float beta, float* c, const BatchStrides& strides) {
  const GemmShape s = packed(shape);
  if (!nonempty_batch(device, s, strides)) return;
  SKEW_ON_CUDA(device, "strided-batched gemm_bf16", cuda::gemm_bf16_strided_batched(s, alpha, a, b, beta, c, strides));
  for (int i = 0; i < strides.count; ++i)
    gemm_bf16(Device::Host, s, alpha, a + i * strides.a, b + i * strides.b, beta, c + i * strides.c);
}

const char* gemm_bf16_host_path() {
  return cpu::has_avx512_bf16()
             ? "the AVX512-BF16 kernel"
             : "rounded copies and SGEMM (this CPU has no AVX512-BF16: slower than fp32, same numerics)";
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

}  // namespace skew::kernels
