// Flow schema on the CPU: the radix sort and tile CSC the FM flow builds, and the batch's
// feature slots FFM claims. LR, FM and FFM take passes of their own (kernels/cpu/wide_flow_lr.cpp,
// wide_flow_fm.cpp, wide_flow_ffm.cpp).
#include "kernels/wide_flow.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

namespace skew::kernels {

namespace {

constexpr int kDigitBits = std::bit_width(kWideRadixBuckets) - 1;
constexpr std::uint32_t kBuckets = std::uint32_t(kWideRadixBuckets);

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
    : shape_(shape),
      options_(options),
      hot_(std::clamp<std::int64_t>(options.hot_features, 0, shape.num_features)),
      routed_hot_(hot_) {
  if (options_.tile_samples < 1) options_.tile_samples = 1;
  const std::int64_t replica_bytes = std::int64_t(threads) * shape.num_features * std::int64_t(sizeof(float));
  if (shape.kind == WideKind::LR && replica_bytes <= options.replica_budget_bytes) hot_ = shape.num_features;
  scratch_.resize(static_cast<std::size_t>(threads));
  // LR's replicas are grown by its kernel (to the pool's threads), as zero pages: nothing to do here.
  if (shape.kind == WideKind::FM)
    owner_tags_.resize(std::size_t(shape.num_features));
  else if (shape.kind == WideKind::FFM)
    slots_.resize(shape.num_features);
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

void WideFeatureSlots::start_batch(std::size_t chunks) {
  // The id takes the tag's top 24 bits: when it wraps, every tag is cleared once.
  if (++batch_ == (std::uint64_t(1) << (64 - kBatchShift))) {
    std::fill(tags_.begin(), tags_.end(), std::uint64_t(0));
    batch_ = 1;
  }
  claimed_.resize(chunks);
  offset_.assign(kMaxChunks, 0u);
}

void WideFeatureSlots::claim(const WideBatch& b, std::int64_t begin, std::int64_t end, std::uint32_t chunk) {
  const std::uint64_t batch = batch_ << kBatchShift, chunk_bits = std::uint64_t(chunk) << kChunkShift;
  // Filled in a local and moved back once: the chunks' vector headers share a cache line, and a
  // push_back through one for every claim bounced that line between the threads.
  std::vector<std::uint32_t> mine = std::move(claimed_[chunk]);
  mine.clear();
  for (std::int64_t e = begin; e < end; ++e) {
    // The tags of rare features lie scattered over 8 bytes a feature (megabytes): each is
    // fetched this many entries before its turn.
    constexpr std::int64_t kTagsAhead = 16;
    if (e + kTagsAhead < end) __builtin_prefetch(&tags_[b.index[e + kTagsAhead]]);
    std::atomic_ref<std::uint64_t> tag(tags_[b.index[e]]);
    std::uint64_t seen = tag.load(std::memory_order_relaxed);
    // Most entries are of features claimed already (by this chunk, mostly): a load, no swap.
    if ((seen >> kBatchShift) == batch_) continue;
    if (tag.compare_exchange_strong(seen, batch | chunk_bits | mine.size(), std::memory_order_relaxed))
      mine.push_back(b.index[e]);
  }
  claimed_[chunk] = std::move(mine);
}

std::size_t WideFeatureSlots::finish() {
  std::uint32_t n = 0;
  for (std::size_t c = 0; c < claimed_.size(); ++c) {
    offset_[c] = n;
    n += std::uint32_t(claimed_[c].size());
  }
  return n;
}

void WideFeatureSlots::write_features(std::uint32_t chunk, std::uint32_t* features) const {
  std::copy(claimed_[chunk].begin(), claimed_[chunk].end(), features + offset_[chunk]);
}

void WideFlow::sparse_gradient(const WideBatch& b, const float* params, float* logits, WidePool& pool,
                               WideSparseGradient& out, const WideFusedUpdate* update) {
  if (shape_.kind == WideKind::LR)
    sparse_gradient_lr(b, params, logits, pool, out, update);
  else if (shape_.kind == WideKind::FM)
    sparse_gradient_fm(b, params, logits, pool, out, update);
  else
    sparse_gradient_ffm(b, params, logits, pool, out);
}

void WideFlow::gradient(const WideBatch& b, const float* params, float* grad, float* logits, WidePool& pool) {
  sparse_gradient(b, params, logits, pool, sparse_);
  grad[0] += sparse_.bias;
  const std::size_t row_len = std::size_t(shape_.row_len());
  for (auto& part : sparse_.parts)
    for (std::size_t r = 0; r < part.features.size(); ++r) {
      const float* row = part.folded_row(r, row_len);
      for (std::size_t j = 0; j < row_len; ++j) grad[1 + std::size_t(part.features[r]) * row_len + j] += row[j];
    }
}

}  // namespace skew::kernels
