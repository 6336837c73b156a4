// FFM's field-pair loops, the per-entry bodies that every FFM kernel runs: the CPU classical and
// flow kernels (kernels/cpu/wide_classical.cpp, wide_flow.cpp) and both CUDA ones
// (kernels/cuda/wide_ffm.cu). The pairwise term <v_{a,field_b}, v_{b,field_a}> x_a x_b does not
// factor into per-feature partial sums as FM's does, so each kernel walks a sample's pairs
// entry by entry; the kernels differ only in how they spread the entries over threads and where
// the gradient lands.
#pragma once
#include <cstdint>

#include "core/host_device.hpp"
#include "kernels/wide_model.hpp"

namespace skew::kernels {

// `k` (the latent length) is an int, or a std::integral_constant where a caller compiles a loop
// for a common k: its k-long loops then unroll into whole vector operations, in the same order.

// The pair term <v_{a,field_o}, v_{o,field_a}> x_a x_o of entries a and o of one sample.
template <typename K>
SKEW_HD inline float wide_ffm_pair_logit(const WideBatch& b, K k, int row_len, const float* params, std::int64_t a,
                                         std::int64_t o) {
  const float* va = params + 1 + std::int64_t(b.index[a]) * row_len + 1 + b.field[o] * k;
  const float* vb = params + 1 + std::int64_t(b.index[o]) * row_len + 1 + b.field[a] * k;
  float dot = 0.0f;
  for (int f = 0; f < k; ++f) dot += va[f] * vb[f];
  return dot * b.value[a] * b.value[o];
}

// `z` plus entry e's linear term and its pairs with the later entries (e, end) of its sample.
// Summed over a sample's entries this gives the logit less the bias: the CPU kernels chain `z`
// through the entries in order, the CUDA classical kernel adds up per-entry parts (z = 0); the
// CUDA flow kernel adds the same linear and pair terms spread evenly over a warp's lanes.
template <typename K>
SKEW_HD inline float wide_ffm_entry_logit(const WideBatch& b, K k, int row_len, const float* params, std::int64_t e,
                                          std::int64_t end, float z) {
  z += params[1 + std::int64_t(b.index[e]) * row_len] * b.value[e];
  for (std::int64_t o = e + 1; o < end; ++o) z += wide_ffm_pair_logit(b, k, row_len, params, e, o);
  return z;
}

// Entry e's share of the pair (e, o) in its sample's gradient, for loss gradient g:
// d z / d v_{e,field_o} = v_{o,field_e} x_e x_o, added into the field_o block of `out` (e's
// gradient row). `add(dst, v)` adds v at dst, plainly or atomically as the caller's threads
// require (CPU: wide_add_to, CUDA: atomicAdd).
template <typename K, typename Add>
SKEW_HD inline void wide_ffm_pair_scatter(const WideBatch& b, K k, int row_len, const float* params, std::int64_t e,
                                          std::int64_t o, float g, float* out, Add add) {
  const float* vb = params + 1 + std::int64_t(b.index[o]) * row_len + 1 + b.field[e] * k;
  float* ga = out + 1 + b.field[o] * k;
  const float scale = g * b.value[e] * b.value[o];
  for (int f = 0; f < k; ++f) add(ga + f, scale * vb[f]);
}

// Entry e's gradient row, for a sample with loss gradient g and entries [begin, end):
// d z / d w_e = x_e and its share of every pair (e, o). `out` is the row of e's feature in the
// gradient array or in a cache of hot rows.
template <typename K, typename Add>
SKEW_HD inline void wide_ffm_entry_scatter(const WideBatch& b, K k, int row_len, const float* params, std::int64_t e,
                                           std::int64_t begin, std::int64_t end, float g, float* out, Add add) {
  add(out, g * b.value[e]);
  for (std::int64_t o = begin; o < end; ++o)
    if (o != e) wide_ffm_pair_scatter(b, k, row_len, params, e, o, g, out, add);
}

}  // namespace skew::kernels
