// Expert FFN GEMM for all local experts in one call: for each group g (an expert), rows
// [offsets[g], offsets[g+1]) of a [rows, k] times b[g] [k, n] gives the same rows of c [rows, n].
// Inputs are rounded to bf16 and products accumulated in fp32: cublasGemmEx (bf16 tensor cores)
// on the GPU, the same rounding followed by an fp32 SGEMM on the CPU, so both agree to fp32
// accumulation-order error. `offsets` and the pointer array `b` live on the host.
#pragma once
#include <cstdint>

#include "lib/core/tensor.hpp"

namespace skew::kernels::moe {

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c);

namespace cuda {
void grouped_gemm_bf16(int groups, const std::int64_t* offsets, int n, int k, const float* a, const float* const* b,
                       float* c);
}  // namespace cuda

}  // namespace skew::kernels::moe
