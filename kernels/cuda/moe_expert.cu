// CUDA twins of kernels/moe_expert.hpp's bf16-operand form: the rounding kernel runs the same
// per-element body as the CPU twin (core/bf16.hpp); the grouped GEMM is one cublasGemmEx per
// non-empty expert on operands already in bf16 (fp32 accumulate and output; the weight transposed
// for the backward's dy W^T), so no call converts weights. Row-major C = A B is the column-major
// C^T = B^T A^T: operands swap (kernels/cuda/gemm.cpp).
#include <cublas_v2.h>

#include <algorithm>
#include <limits>

#include "core/bf16.hpp"
#include "core/cuda_check.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/moe_expert.hpp"

namespace skew::kernels::moe::cuda {
namespace {

constexpr int kBlock = 256;

__global__ void round_kernel(const float* in, std::int64_t count, std::uint16_t* out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = bf16_bits_nearest_even(in[i]);
}

}  // namespace

void to_bf16_bits(const float* in, std::int64_t count, std::uint16_t* out) {
  if (count == 0) return;
  const int grid = static_cast<int>(std::min<std::int64_t>((count + kBlock - 1) / kBlock, 1 << 16));
  round_kernel<<<grid, kBlock>>>(in, count, out);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void grouped_gemm_bf16_operands(int groups, const std::int64_t* offsets, bool trans_b, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float beta, float* c) {
  const float alpha = 1.f;
  for (int g = 0; g < groups; ++g) {
    const std::int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    SKEW_CHECK(rows <= std::numeric_limits<int>::max(),
               "grouped GEMM: expert " << g << " has " << rows << " rows, more than cuBLAS's int");
    SKEW_CUBLAS_CHECK(cublasGemmEx(kernels::cuda::cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n,
                                   static_cast<int>(rows), k, &alpha, b[g], CUDA_R_16BF, trans_b ? k : n,
                                   a + offsets[g] * k, CUDA_R_16BF, k, &beta, c + offsets[g] * n, CUDA_R_32F, n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace skew::kernels::moe::cuda
