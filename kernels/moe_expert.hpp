// Expert FFN GEMM for all local experts in one call: for each group g (an expert), rows
// [offsets[g], offsets[g+1]) of a [rows, k] times b[g] [k, n] gives the same rows of c [rows, n].
// Inputs are rounded to bf16 and products accumulated in fp32, so both backends agree to fp32
// accumulation-order error. `offsets` and the pointer array `b` live on the host; a, b[g] and c
// on `device`.
//
// Two forms. grouped_gemm_bf16 takes fp32 operands and rounds them inside every call (simple,
// but it re-reads and re-converts every expert's weights at every call). The bf16-operand form
// takes operands already rounded (bf16 bits, as to_bf16_bits writes them): a trainer rounds its
// fp32 master weights once after each optimizer step and its activations once per layer call,
// which is how mixed-precision frameworks keep weight copies.
#pragma once
#include <cstdint>

#include "lib/core/tensor.hpp"

namespace skew::kernels::moe {

void grouped_gemm_bf16(Device device, int groups, const std::int64_t* offsets, int n, int k, const float* a,
                       const float* const* b, float* c);

// out[i] = in[i] rounded to the nearest bf16 (even on ties), as bits; in and out on `device`.
void to_bf16_bits(Device device, const float* in, std::int64_t count, std::uint16_t* out);

void grouped_gemm_bf16_operands(Device device, int groups, const std::int64_t* offsets, int n, int k,
                                const std::uint16_t* a, const std::uint16_t* const* b, float* c);

namespace cuda {
void to_bf16_bits(const float* in, std::int64_t count, std::uint16_t* out);
void grouped_gemm_bf16_operands(int groups, const std::int64_t* offsets, int n, int k, const std::uint16_t* a,
                                const std::uint16_t* const* b, float* c);
}  // namespace cuda

}  // namespace skew::kernels::moe
