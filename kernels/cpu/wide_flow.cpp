// Flow schema on the CPU: tiles of samples are the tasks; within a tile the batch is re-sorted
// into a feature-oriented CSC and trained by the gather/apply/scatter programs of
// kernels/wide_flow.hpp. Hot-feature gradients accumulate in per-thread replicas for the whole
// batch (one reduction at the end); cold ones get one atomic add per weight per tile. LR takes
// its own two passes instead (WideFlow::sparse_gradient, kernels/cpu/wide_flow_lr.cpp).
#include "kernels/wide_flow.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/wide_ffm.hpp"

namespace skew::kernels {

namespace {

constexpr int kDigitBits = 11;
constexpr std::uint32_t kBuckets = 1u << kDigitBits;

}  // namespace

void wide_radix_sort_pairs(std::uint32_t* keys, std::uint32_t* values, std::size_t n, int bits, std::uint32_t* keys_tmp,
                           std::uint32_t* values_tmp, std::uint32_t* counts) {
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    std::fill(counts, counts + kBuckets, 0u);
    for (std::size_t i = 0; i < n; ++i) ++counts[(keys[i] >> shift) & (kBuckets - 1)];
    std::uint32_t sum = 0;
    for (std::uint32_t d = 0; d < kBuckets; ++d) {
      const std::uint32_t c = counts[d];
      counts[d] = sum;
      sum += c;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t pos = counts[(keys[i] >> shift) & (kBuckets - 1)]++;
      keys_tmp[pos] = keys[i];
      values_tmp[pos] = values[i];
    }
    std::memcpy(keys, keys_tmp, n * sizeof(std::uint32_t));
    std::memcpy(values, values_tmp, n * sizeof(std::uint32_t));
  }
}

WideFlow::WideFlow(const WideShape& shape, const WideFlowOptions& options, int threads)
    : shape_(shape), options_(options), hot_(std::min(options.hot_features, shape.num_features)) {
  if (options_.tile_samples < 1) options_.tile_samples = 1;
  if (hot_ < 0) hot_ = 0;
  const std::int64_t replica_bytes = std::int64_t(threads) * shape.num_features * std::int64_t(sizeof(float));
  if (shape.kind == WideKind::LR && replica_bytes <= options.replica_budget_bytes) hot_ = shape.num_features;
  scratch_.resize(static_cast<std::size_t>(threads));
  hot_cache_.assign(
      static_cast<std::size_t>(threads),
      std::vector<float>(static_cast<std::size_t>(hot_) * static_cast<std::size_t>(shape.row_len()), 0.0f));
}

// The tile's entries sorted by feature id; col_begin[c]..col_begin[c+1] are column c's entries
// (order[] holds entry offsets relative to the tile's first nonzero).
void WideFlow::build_tile_csc(const WideBatch& b, std::int64_t first, std::int64_t last, WideTileScratch& t) const {
  const std::int64_t base = b.row_ptr[first];
  const std::size_t n = static_cast<std::size_t>(b.row_ptr[last] - base);
  t.keys.resize(n);
  t.keys_tmp.resize(n);
  t.order.resize(n);
  t.order_tmp.resize(n);
  t.counts.resize(kBuckets);
  std::uint32_t max_key = 0;
  for (std::size_t e = 0; e < n; ++e) {
    t.keys[e] = b.index[base + static_cast<std::int64_t>(e)];
    t.order[e] = static_cast<std::uint32_t>(e);
    max_key = std::max(max_key, t.keys[e]);
  }
  wide_radix_sort_pairs(t.keys.data(), t.order.data(), n, std::bit_width(max_key), t.keys_tmp.data(),
                        t.order_tmp.data(), t.counts.data());
  t.col_feature.clear();
  t.col_begin.clear();
  for (std::size_t e = 0; e < n; ++e) {
    if (e == 0 || t.keys[e] != t.keys[e - 1]) {
      t.col_feature.push_back(t.keys[e]);
      t.col_begin.push_back(static_cast<std::uint32_t>(e));
    }
  }
  t.col_begin.push_back(static_cast<std::uint32_t>(n));
}

namespace {

// Columns of a tile are distinct features in id order, so their rows are scattered over the
// parameter array: fetch the rows this many columns ahead.
constexpr std::size_t kColumnPrefetch = 8;

// Sample index (within the tile) of each entry: entries of a tile are contiguous per sample.
inline void entry_samples(const WideBatch& b, std::int64_t first, std::int64_t last, std::vector<std::uint32_t>& out) {
  const std::int64_t base = b.row_ptr[first];
  out.resize(static_cast<std::size_t>(b.row_ptr[last] - base));
  for (std::int64_t i = first; i < last; ++i)
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
      out[static_cast<std::size_t>(e - base)] = static_cast<std::uint32_t>(i - first);
}

template <typename Program, bool Atomic>
void flow_tile(const Program& prog, const WideShape& s, const WideBatch& b, std::int64_t first, std::int64_t last,
               const float* params, float* grad, float* logits, std::int64_t hot, float* hot_cache, WideTileScratch& t,
               std::vector<std::uint32_t>& sample_of, float& bias_grad, WideFlowStats& stats) {
  const int row_len = s.row_len(), acc_len = prog.acc_len();
  const std::int64_t base = b.row_ptr[first];
  const std::size_t samples = static_cast<std::size_t>(last - first);
  entry_samples(b, first, last, sample_of);
  // Summed here, not in bias_grad: the threads' bias sums sit side by side in one cache line,
  // and a store per sample into it would bounce the line between the cores.
  float tile_bias_grad = 0.0f;
  t.acc.assign(samples * static_cast<std::size_t>(acc_len), 0.0f);
  t.sample_grad.resize(samples);
  t.row_grad.resize(static_cast<std::size_t>(row_len));
  const std::size_t columns = t.col_feature.size();
  // gather: feature -> sample.
  for (std::size_t c = 0; c < columns; ++c) {
    if (c + kColumnPrefetch < columns) wide_prefetch_row(params + 1 + std::int64_t(t.col_feature[c + kColumnPrefetch]) * row_len, row_len);
    const float* row = params + 1 + std::int64_t(t.col_feature[c]) * row_len;
    for (std::uint32_t e = t.col_begin[c]; e < t.col_begin[c + 1]; ++e) {
      const std::uint32_t entry = t.order[e];
      prog.gather(row, b.value[base + entry], t.acc.data() + std::size_t(sample_of[entry]) * acc_len);
    }
  }
  // apply: per sample.
  for (std::size_t i = 0; i < samples; ++i) {
    const float z = prog.apply(t.acc.data() + i * acc_len, params[0]);
    logits[first + std::int64_t(i)] = z;
    const float g = wide_sigmoid(z) - b.label[first + std::int64_t(i)];
    t.sample_grad[i] = g;
    tile_bias_grad += g;
  }
  bias_grad += tile_bias_grad;
  // scatter: sample -> feature, one write per weight per tile.
  std::int64_t hot_columns = 0;
  for (std::size_t c = 0; c < columns; ++c) {
    if (c + kColumnPrefetch < columns) {
      const std::int64_t ahead = 1 + std::int64_t(t.col_feature[c + kColumnPrefetch]) * row_len;
      wide_prefetch_row(params + ahead, row_len);
      if (t.col_feature[c + kColumnPrefetch] >= hot) wide_prefetch_row(grad + ahead, row_len);
    }
    const std::int64_t feature = t.col_feature[c];
    const float* row = params + 1 + feature * row_len;
    std::fill(t.row_grad.begin(), t.row_grad.end(), 0.0f);
    for (std::uint32_t e = t.col_begin[c]; e < t.col_begin[c + 1]; ++e) {
      const std::uint32_t entry = t.order[e], i = sample_of[entry];
      prog.scatter(row, b.value[base + entry], t.acc.data() + std::size_t(i) * acc_len, t.sample_grad[i],
                   t.row_grad.data());
    }
    if (feature < hot) {
      float* cached = hot_cache + feature * row_len;
      for (int j = 0; j < row_len; ++j) cached[j] += t.row_grad[std::size_t(j)];
      ++hot_columns;
    } else {
      float* out = grad + 1 + feature * row_len;
      for (int j = 0; j < row_len; ++j) wide_add_to<Atomic>(out + j, t.row_grad[std::size_t(j)]);
    }
  }
  stats.columns += static_cast<std::int64_t>(columns);
  stats.hot_columns += hot_columns;
}

// FFM: per-sample pairwise loops within the tile, gradients through the hot cache.
template <bool Atomic>
void flow_tile_ffm(const WideShape& s, const WideBatch& b, std::int64_t first, std::int64_t last, const float* params,
                   float* grad, float* logits, std::int64_t hot, float* hot_cache, float& bias_grad) {
  const int row_len = s.row_len(), k = s.k;
  float tile_bias_grad = 0.0f;  // as in flow_tile: one store into the shared line per tile
  for (std::int64_t i = first; i < last; ++i) {
    // The next sample's parameter rows and (cold ones) gradient rows are fetched while this
    // sample's pairs run: rare features' rows are scattered over gigabytes.
    if (i + 1 < last) wide_prefetch_sample_rows(b, row_len, i + 1, params, grad, nullptr);
    const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
    float z = params[0];
    for (std::int64_t e = begin; e < end; ++e) z = wide_ffm_entry_logit(b, k, row_len, params, e, end, z);
    logits[i] = z;
    const float g = wide_sigmoid(z) - b.label[i];
    tile_bias_grad += g;
    for (std::int64_t e = begin; e < end; ++e) {
      // A hot row is this thread's own replica: plain adds.
      const std::int64_t feature = b.index[e];
      if (feature < hot)
        wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, hot_cache + feature * row_len,
                               wide_add_to<false>);
      else
        wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, grad + 1 + feature * row_len,
                               wide_add_to<Atomic>);
    }
  }
  bias_grad += tile_bias_grad;
}

}  // namespace

void WideFlow::gradient(const WideBatch& b, const float* params, float* grad, float* logits, WidePool& pool) {
  if (has_sparse_gradient()) {
    sparse_gradient(b, params, logits, pool, sparse_);
    grad[0] += sparse_.bias;
    const std::int64_t row_len = shape_.row_len();
    for (const auto& part : sparse_.parts)
      for (std::size_t r = 0; r < part.features.size(); ++r)
        for (std::int64_t j = 0; j < row_len; ++j)
          grad[1 + std::int64_t(part.features[r]) * row_len + j] += part.rows[std::size_t(r * row_len + j)];
    return;
  }
  const int threads = static_cast<int>(scratch_.size());
  if (pool.threads() > threads) {
    scratch_.resize(static_cast<std::size_t>(pool.threads()));
    hot_cache_.resize(
        static_cast<std::size_t>(pool.threads()),
        std::vector<float>(static_cast<std::size_t>(hot_) * static_cast<std::size_t>(shape_.row_len()), 0.0f));
  }
  const std::int64_t tile = options_.tile_samples;
  const std::int64_t tiles = (b.rows + tile - 1) / tile;
  const bool atomic = pool.threads() > 1;
  std::vector<float> bias_grads(static_cast<std::size_t>(pool.threads()), 0.0f);
  std::vector<WideFlowStats> stats(static_cast<std::size_t>(pool.threads()));
  std::vector<std::vector<std::uint32_t>> sample_of(static_cast<std::size_t>(pool.threads()));
  pool.run(tiles, [&](std::int64_t task, int thread) {
    const std::int64_t first = task * tile, last = std::min(b.rows, first + tile);
    const std::size_t t = static_cast<std::size_t>(thread);
    float* cache = hot_cache_[t].data();
    if (shape_.kind == WideKind::FFM) {
      if (atomic)
        flow_tile_ffm<true>(shape_, b, first, last, params, grad, logits, hot_, cache, bias_grads[t]);
      else
        flow_tile_ffm<false>(shape_, b, first, last, params, grad, logits, hot_, cache, bias_grads[t]);
      return;
    }
    build_tile_csc(b, first, last, scratch_[t]);
    stats[t].entries += b.row_ptr[last] - b.row_ptr[first];
    const auto run = [&](const auto& prog) {
      if (atomic)
        flow_tile<std::decay_t<decltype(prog)>, true>(prog, shape_, b, first, last, params, grad, logits, hot_, cache,
                                                      scratch_[t], sample_of[t], bias_grads[t], stats[t]);
      else
        flow_tile<std::decay_t<decltype(prog)>, false>(prog, shape_, b, first, last, params, grad, logits, hot_, cache,
                                                       scratch_[t], sample_of[t], bias_grads[t], stats[t]);
    };
    run(FmProgram{shape_.k});
  });
  // Reduce the per-thread replicas of the hot rows into the global gradient, in slices.
  const std::int64_t hot_floats = hot_ * shape_.row_len();
  constexpr std::int64_t kSlice = 16384;
  const int replicas = pool.threads();
  pool.run((hot_floats + kSlice - 1) / kSlice, [&](std::int64_t task, int) {
    const std::int64_t begin = task * kSlice, end = std::min(hot_floats, begin + kSlice);
    for (int r = 0; r < replicas; ++r) {
      float* cache = hot_cache_[std::size_t(r)].data();
      for (std::int64_t j = begin; j < end; ++j) {
        grad[1 + j] += cache[j];
        cache[j] = 0.0f;
      }
    }
  });
  stats_ = WideFlowStats{};
  stats_.tiles = tiles;
  for (int r = 0; r < replicas; ++r) {
    grad[0] += bias_grads[std::size_t(r)];
    stats_.entries += stats[std::size_t(r)].entries;
    stats_.columns += stats[std::size_t(r)].columns;
    stats_.hot_columns += stats[std::size_t(r)].hot_columns;
  }
}

}  // namespace skew::kernels
