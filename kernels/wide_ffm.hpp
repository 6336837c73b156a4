// FFM's field-pair loops, the per-entry bodies that every FFM kernel runs: the CPU classical and
// flow kernels (kernels/cpu/wide_classical.cpp, wide_flow.cpp) and both CUDA ones
// (kernels/cuda/wide_ffm.cu). The pairwise term <v_{a,field_b}, v_{b,field_a}> x_a x_b does not
// factor into per-feature partial sums as FM's does, so each kernel walks a sample's pairs
// entry by entry; the kernels differ only in how they spread the entries over threads and where
// the gradient lands.
#pragma once
#include <cstdint>

#include "kernels/wide_model.hpp"
#include "lib/core/host_device.hpp"

namespace skew::kernels {

// `z` plus entry e's linear term and its pairs with the later entries (e, end) of its sample.
// Summed over a sample's entries this gives the logit less the bias: the CPU kernels chain `z`
// through the entries in order, the CUDA kernels add up per-entry parts (z = 0), which lets a
// warp split a sample's entries over its lanes.
SKEW_HD inline float wide_ffm_entry_logit(const WideBatch& b, int k, int row_len, const float* params,
                                          std::int64_t e, std::int64_t end, float z) {
  const float* ra = params + 1 + std::int64_t(b.index[e]) * row_len;
  z += ra[0] * b.value[e];
  for (std::int64_t o = e + 1; o < end; ++o) {
    const float* va = ra + 1 + b.field[o] * k;
    const float* vb = params + 1 + std::int64_t(b.index[o]) * row_len + 1 + b.field[e] * k;
    float dot = 0.0f;
    for (int f = 0; f < k; ++f) dot += va[f] * vb[f];
    z += dot * b.value[e] * b.value[o];
  }
  return z;
}

// Entry e's gradient row, for a sample with loss gradient g and entries [begin, end):
// d z / d w_a = x_a and d z / d v_{a,field_o} = v_{o,field_a} x_a x_o for every other entry o.
// `out` is the row of e's feature in the gradient array or in a cache of hot rows; `add(dst, v)`
// adds v at dst, plainly or atomically as the caller's threads require (CPU: wide_add_to, CUDA:
// atomicAdd).
template <typename Add>
SKEW_HD inline void wide_ffm_entry_scatter(const WideBatch& b, int k, int row_len, const float* params,
                                           std::int64_t e, std::int64_t begin, std::int64_t end, float g, float* out,
                                           Add add) {
  const float x = b.value[e];
  add(out, g * x);
  for (std::int64_t o = begin; o < end; ++o) {
    if (o == e) continue;
    const float* vb = params + 1 + std::int64_t(b.index[o]) * row_len + 1 + b.field[e] * k;
    float* ga = out + 1 + b.field[o] * k;
    const float scale = g * x * b.value[o];
    for (int f = 0; f < k; ++f) add(ga + f, scale * vb[f]);
  }
}

}  // namespace skew::kernels
