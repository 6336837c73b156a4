// Flow schema for FFM on the CPU (WideFlow::sparse_gradient_ffm; see kernels/wide_flow.hpp): the
// tiles dealt out in one contiguous chunk per thread, each chunk summing its gradients into its
// own compact rows, one per distinct feature of the batch (no atomics, a fixed order of sums).
//
// A sample's pairs read two latent blocks of k floats each, <v_{a,field_o}, v_{o,field_a}>, and
// its scatter adds g x_a x_o v_{o,field_a} into block field_o of a's gradient row. With k a
// multiple of 4 these blocks are handled four floats at a time (one SSE register, GCC's vector
// extension), and each entry's rows are looked up once per sample instead of once per pair. The
// scatter is the scalar loop's arithmetic lane by lane (the same floats); the logit sums the pair
// terms in four lanes, added together once per sample, as xLearn's SSE kernel does, instead of
// one float after another: z differs from the scalar order's in its last bits (the float64
// reference tests bound it), and the pairs no longer wait on one chain of additions. No fused
// multiply-add anywhere (x86-64 baseline flags), so the model does not depend on the CPU. Other k
// take the per-entry bodies of kernels/wide_ffm.hpp, which the classical and CUDA kernels share.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/wide_ffm.hpp"
#include "kernels/wide_flow.hpp"

namespace skew::kernels {

namespace {

// Four floats, one SSE register: + and * act lane by lane.
typedef float Float4 __attribute__((vector_size(16)));

[[gnu::always_inline]] inline Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);  // latent blocks start at any float: an unaligned load
  return v;
}

[[gnu::always_inline]] inline void store4(float* p, Float4 v) {
  std::memcpy(p, &v, sizeof v);
}

// One entry of the sample in hand: its feature's latent blocks (the parameter row past w), its
// gradient row in the chunk's compact rows, its field's block offset (field x k) and its value.
struct FfmEntry {
  const float* latent;
  float* grad;
  std::int64_t block;
  float value;
};

// One tile of FFM with k = 4 x Blocks: per-sample pairwise loops, each entry's gradient added
// into its slot's row. The gradient is flow_tile_ffm's (below) operation for operation: each
// gradient float gets g x_a x_o times the latent float added, in entry and pair order; the logit
// is the bias, the linear terms in entry order, then the pair terms' four lanes summed.
template <int Blocks>
void flow_tile_ffm_blocks(const WideShape& s, const WideBatch& b, std::int64_t first, std::int64_t last,
                          std::int64_t chunk_last, const float* params, const WideFeatureSlots& slots, float* rows,
                          float* logits, float& bias_grad, std::vector<FfmEntry>& entries) {
  constexpr int k = 4 * Blocks;
  const int row_len = s.row_len();
  float tile_bias_grad = 0.0f;  // as in flow_tile: one store into the shared line per tile
  for (std::int64_t i = first; i < last; ++i) {
    // The next sample's parameter rows are fetched while this sample's pairs run: rare
    // features' rows are scattered over gigabytes. The next tile's first sample too: FFM's tiles
    // are as small as 16 samples (half its batch of 32).
    if (i + 1 < chunk_last) wide_prefetch_sample_rows(b, row_len, i + 1, params, nullptr, nullptr);
    const std::int64_t begin = b.row_ptr[i], n = b.row_ptr[i + 1] - begin;
    entries.resize(std::size_t(n));
    float z = params[0];
    for (std::int64_t a = 0; a < n; ++a) {
      const std::int64_t e = begin + a;
      const float* row = params + 1 + std::int64_t(b.index[e]) * row_len;
      entries[std::size_t(a)] = {row + 1, rows + std::size_t(slots.slot(b.index[e])) * std::size_t(row_len),
                                 std::int64_t(b.field[e]) * k, b.value[e]};
    }
    Float4 pairs = {};  // the pair terms, summed lane by lane
    for (std::int64_t a = 0; a < n; ++a) {
      const FfmEntry& ea = entries[std::size_t(a)];
      z += ea.latent[-1] * ea.value;
      for (std::int64_t o = a + 1; o < n; ++o) {
        const FfmEntry& eo = entries[std::size_t(o)];
        const float* va = ea.latent + eo.block;
        const float* vo = eo.latent + ea.block;
        Float4 dot = load4(va) * load4(vo);
        for (int c = 1; c < Blocks; ++c) dot += load4(va + 4 * c) * load4(vo + 4 * c);
        const float x = ea.value * eo.value;
        pairs += dot * Float4{x, x, x, x};
      }
    }
    z += (pairs[0] + pairs[1]) + (pairs[2] + pairs[3]);
    logits[i] = z;
    const float g = wide_sigmoid(z) - b.label[i];
    tile_bias_grad += g;
    for (std::int64_t a = 0; a < n; ++a) {
      const FfmEntry& ea = entries[std::size_t(a)];
      ea.grad[0] += g * ea.value;
      for (std::int64_t o = 0; o < n; ++o) {
        if (o == a) continue;
        const FfmEntry& eo = entries[std::size_t(o)];
        const float* vo = eo.latent + ea.block;
        float* ga = ea.grad + 1 + eo.block;
        const float pair_scale = g * ea.value * eo.value;
        const Float4 scale = {pair_scale, pair_scale, pair_scale, pair_scale};
        for (int c = 0; c < Blocks; ++c) store4(ga + 4 * c, load4(ga + 4 * c) + scale * load4(vo + 4 * c));
      }
    }
  }
  bias_grad += tile_bias_grad;
}

// One tile of FFM for any k: the per-entry bodies the CUDA kernels share.
void flow_tile_ffm(int k, const WideShape& s, const WideBatch& b, std::int64_t first, std::int64_t last,
                   std::int64_t chunk_last, const float* params, const WideFeatureSlots& slots, float* rows,
                   float* logits, float& bias_grad) {
  const int row_len = s.row_len();
  float tile_bias_grad = 0.0f;
  for (std::int64_t i = first; i < last; ++i) {
    if (i + 1 < chunk_last) wide_prefetch_sample_rows(b, row_len, i + 1, params, nullptr, nullptr);
    const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
    float z = params[0];
    for (std::int64_t e = begin; e < end; ++e) z = wide_ffm_entry_logit(b, k, row_len, params, e, end, z);
    logits[i] = z;
    const float g = wide_sigmoid(z) - b.label[i];
    tile_bias_grad += g;
    for (std::int64_t e = begin; e < end; ++e)
      wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g,
                             rows + std::size_t(slots.slot(b.index[e])) * std::size_t(row_len), wide_add_to<false>);
  }
  bias_grad += tile_bias_grad;
}

// FFM's pair loops are 4 to 16 floats long, so their loop control costs as much as their
// arithmetic unless k is known when they compile: k = 4, 8 and 16 get their own copies.
void flow_tile_ffm_for_k(const WideShape& s, const WideBatch& b, std::int64_t first, std::int64_t last,
                         std::int64_t chunk_last, const float* params, const WideFeatureSlots& slots, float* rows,
                         float* logits, float& bias_grad, std::vector<FfmEntry>& entries) {
  const auto blocks = [&]<int Blocks>() {
    flow_tile_ffm_blocks<Blocks>(s, b, first, last, chunk_last, params, slots, rows, logits, bias_grad, entries);
  };
  switch (s.k) {
    case 4: return blocks.operator()<1>();
    case 8: return blocks.operator()<2>();
    case 16: return blocks.operator()<4>();
    default: flow_tile_ffm(s.k, s, b, first, last, chunk_last, params, slots, rows, logits, bias_grad);
  }
}

}  // namespace

void WideFlow::sparse_gradient_ffm(const WideBatch& b, const float* params, float* logits, WidePool& pool,
                                   WideSparseGradient& out) {
  out.parts.resize(1);
  WideSparseGradient::Part& part = out.parts[0];
  const std::int64_t tile = options_.tile_samples;
  const std::int64_t tiles = (b.rows + tile - 1) / tile;
  // One chunk of whole tiles per thread, in batch order: the same chunks, and so the same sums,
  // whichever thread runs them.
  const std::int64_t chunks = std::clamp<std::int64_t>(std::min<std::int64_t>(pool.threads(), tiles), 1,
                                                       std::int64_t(WideFeatureSlots::kMaxChunks));
  const auto chunk_rows = [&](std::int64_t chunk, std::int64_t& first, std::int64_t& last) {
    first = std::min(b.rows, tiles * chunk / chunks * tile);
    last = std::min(b.rows, tiles * (chunk + 1) / chunks * tile);
  };
  slots_.start_batch(std::size_t(chunks));
  pool.run(chunks, [&](std::int64_t chunk, int) {
    std::int64_t first, last;
    chunk_rows(chunk, first, last);
    slots_.claim(b, b.row_ptr[first], b.row_ptr[last], std::uint32_t(chunk));
  });
  const std::size_t slots = slots_.finish();
  part.features.resize(slots);
  const std::size_t row_floats = slots * std::size_t(shape_.row_len());
  part.partial_rows.resize(std::size_t(chunks - 1));
  std::vector<float> bias_grads(std::size_t(chunks), 0.0f);
  pool.run(chunks, [&](std::int64_t chunk, int) {
    slots_.write_features(std::uint32_t(chunk), part.features.data());
    std::vector<float>& rows = chunk == 0 ? part.rows : part.partial_rows[std::size_t(chunk - 1)];
    rows.assign(row_floats, 0.0f);
    std::int64_t chunk_first, chunk_last;
    chunk_rows(chunk, chunk_first, chunk_last);
    std::vector<FfmEntry> entries;
    for (std::int64_t first = chunk_first; first < chunk_last; first += tile)
      flow_tile_ffm_for_k(shape_, b, first, std::min(chunk_last, first + tile), chunk_last, params, slots_, rows.data(),
                          logits, bias_grads[std::size_t(chunk)], entries);
  });
  out.bias = 0.0f;
  for (const float g : bias_grads) out.bias += g;
  stats_ = WideFlowStats{};
  stats_.tiles = tiles;
}

}  // namespace skew::kernels
