// Expert FFN GEMM for all local experts in one call: for each group g (an expert), rows
// [offsets[g], offsets[g+1]) of a [rows, k] times b[g] [k, n] gives the same rows of c [rows, n].
// Inputs are rounded to bf16 and products accumulated in fp32 (kernels::gemm_bf16 per group), so
// both backends agree to fp32 accumulation-order error. `offsets` and the pointer array `b` live
// on the host; a, b[g] and c on `device`.
#pragma once
#include <cstdint>

#include "lib/core/tensor.hpp"

namespace skew::kernels::moe {

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c);

}  // namespace skew::kernels::moe
