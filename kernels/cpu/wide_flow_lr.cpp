// Flow schema for LR on the CPU (WideFlow::sparse_gradient_lr; see kernels/wide_flow.hpp): a
// sample pass that routes each entry's gradient into a per-thread hot replica or to the owner of
// the feature's block of parameters, then a feature pass where each thread merges the replicas
// over its range of hot features and each owner reduces its entries block by block in L1-sized
// accumulators; both emit one gradient row per touched feature. No atomics.
#include <algorithm>

#include "kernels/wide_flow.hpp"
#include "kernels/wide_update.hpp"

namespace skew::kernels {

namespace {

constexpr int kBlockBits = 11;  // LR feature pass: blocks of 2048 features, 8 KB of accumulators
constexpr std::uint32_t kBlockMask = (1u << kBlockBits) - 1;
constexpr int kPrefetchDistance = 48;         // entries ahead: about one Criteo-like sample
constexpr std::int64_t kRangesPerThread = 8;  // feature pass: hot ranges a thread

// Cold feature f belongs to the owner of its parameter's block of 64 floats (params[0] is the
// bias, so feature f sits at float 1 + f): four cache lines, so that the line beside each of an
// owner's lines, which the core's spatial prefetcher fetches with it (128-byte pairs), is the
// owner's too. Blocks of one line (16 floats) made a 2-thread run's cold updates 1.4x slower: each
// owner's prefetches took the lines of the other's parameter and state rows away from it.
constexpr int kOwnerBlockBits = 6;
inline std::uint32_t cold_owner(std::uint32_t feature, std::uint32_t owners) {
  return ((feature + 1) >> kOwnerBlockBits) % owners;
}

// Zeroes the replica entries the last batch touched (their bits in `touched`) and the bits.
void clear_replica(float* cache, std::uint64_t* touched, std::size_t dirty_words) {
  for (std::size_t w = 0; w < dirty_words; ++w) {
    for (std::uint64_t bits = touched[w]; bits != 0; bits &= bits - 1)
      cache[w * 64 + std::size_t(__builtin_ctzll(bits))] = 0.0f;
    touched[w] = 0;
  }
}

// What both LR passes read of one batch.
struct LrBatch {
  const WideBatch& b;
  std::int64_t tile, tiles, base, hot;
  std::uint32_t owners;
};

// Where the sample pass of one replica writes: its hot replica and touched bits, the owners'
// cold-entry buffers, and its per-owner counts of the current tile.
struct LrRouting {
  float* cache;
  std::uint64_t* touched;
  std::vector<std::vector<std::uint32_t>>& owner_keys;
  std::vector<std::vector<float>>& owner_values;
  std::vector<std::uint32_t>& counts;
};

// Sample pass over tile `task`: gathers and applies each sample, then routes each entry's
// gradient into the hot replica or to its owner's buffer. Returns the tile's bias gradient.
float lr_sample_tile(const LrBatch& s, std::int64_t task, const float* params, float* logits, double* loss_terms,
                     LrRouting& to) {
  const WideBatch& b = s.b;
  const std::int64_t first = task * s.tile, last = std::min(b.rows, first + s.tile);
  // Counted here and stored once a tile: the tiles' counts share cache lines, and a store into
  // them per routed entry bounced those lines between the threads.
  std::fill(to.counts.begin(), to.counts.end(), 0u);
  const std::size_t offset = std::size_t(b.row_ptr[first] - s.base);
  const std::int64_t stop = b.row_ptr[last];
  float bias_grad = 0.0f;
  for (std::int64_t i = first; i < last; ++i) {
    float z = params[0];
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
      if (e + kPrefetchDistance < stop) __builtin_prefetch(params + 1 + b.index[e + kPrefetchDistance]);
      z += params[1 + b.index[e]] * b.value[e];
    }
    logits[i] = z;
    loss_terms[i] = wide_logloss_term(z, b.label[i]);
    const float g = wide_sigmoid(z) - b.label[i];
    bias_grad += g;
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
      const std::uint32_t f = b.index[e];
      const float v = g * b.value[e];
      if (f < s.hot) {
        to.cache[f] += v;
        // Test before setting: hot features are mostly touched already, and a store to the same
        // few words every entry would chain the loop through memory.
        const std::uint64_t bit = std::uint64_t(1) << (f & 63);
        if (!(to.touched[f >> 6] & bit)) to.touched[f >> 6] |= bit;
      } else {
        const std::uint32_t p = cold_owner(f, s.owners);
        const std::size_t at = offset + to.counts[p]++;
        to.owner_keys[p][at] = f;
        to.owner_values[p][at] = v;
      }
    }
  }
  return bias_grad;
}

// Feature pass over hot words [word_begin, word_end): every touched feature's replicas summed
// into one row. Ranges of whole words (64 features each) are disjoint, so every bit and replica
// entry is merged by one thread. Walking every word costs 1/64 of a read per hot feature per
// batch: small next to a batch's entries even when all are hot.
void merge_hot_words(std::size_t word_begin, std::size_t word_end, int threads,
                     const std::vector<std::vector<std::uint64_t>>& hot_bits,
                     const std::vector<ZeroPageVector<float, false>>& hot_cache, std::vector<std::uint32_t>& features,
                     std::vector<float>& rows) {
  for (std::size_t w = word_begin; w < word_end; ++w) {
    std::uint64_t bits = 0;
    for (int q = 0; q < threads; ++q) bits |= hot_bits[std::size_t(q)][w];
    for (; bits != 0; bits &= bits - 1) {
      const std::uint32_t f = std::uint32_t(w * 64 + std::size_t(__builtin_ctzll(bits)));
      float sum = 0.0f;
      for (int q = 0; q < threads; ++q) sum += hot_cache[std::size_t(q)][f];
      features.push_back(f);
      rows.push_back(sum);
    }
  }
}

// Counting sort of owner p's cold entries (from every tile's region) by block of features, into
// sc.sorted_keys / sorted_values with sc.block_start; returns how many there are.
std::uint32_t sort_owner_entries(const LrBatch& s, std::uint32_t p, std::uint32_t blocks,
                                 const std::vector<std::uint32_t>& tile_owner_counts,
                                 const std::vector<std::uint32_t>& keys, const std::vector<float>& values,
                                 WideTileScratch& sc) {
  sc.block_start.assign(std::size_t(blocks) + 1, 0u);
  std::uint32_t total = 0;
  for (std::int64_t t = 0; t < s.tiles; ++t) {
    const std::size_t offset = std::size_t(s.b.row_ptr[t * s.tile] - s.base);
    const std::uint32_t n = tile_owner_counts[std::size_t(t) * s.owners + p];
    for (std::uint32_t j = 0; j < n; ++j) ++sc.block_start[(keys[offset + j] >> kBlockBits) + 1];
    total += n;
  }
  for (std::uint32_t k = 0; k < blocks; ++k) sc.block_start[k + 1] += sc.block_start[k];
  sc.sorted_keys.resize(total);
  sc.sorted_values.resize(total);
  sc.block_features.assign(sc.block_start.begin(), sc.block_start.end() - 1);  // write cursors
  for (std::int64_t t = 0; t < s.tiles; ++t) {
    const std::size_t offset = std::size_t(s.b.row_ptr[t * s.tile] - s.base);
    const std::uint32_t n = tile_owner_counts[std::size_t(t) * s.owners + p];
    for (std::uint32_t j = 0; j < n; ++j) {
      const std::uint32_t f = keys[offset + j];
      const std::uint32_t at = sc.block_features[f >> kBlockBits]++;
      sc.sorted_keys[at] = f;
      sc.sorted_values[at] = values[offset + j];
    }
  }
  return total;
}

// Reduces each block of sorted entries in its L1-sized accumulators; one row out per touched
// feature, in order of first appearance within the block.
void reduce_blocks(std::uint32_t blocks, std::uint32_t total, WideTileScratch& sc, std::vector<std::uint32_t>& features,
                   std::vector<float>& rows) {
  sc.block_acc.assign(std::size_t(kBlockMask) + 1, 0.0f);
  sc.block_seen.assign(std::size_t(kBlockMask) + 1, 0);
  features.reserve(total);
  rows.reserve(total);
  for (std::uint32_t k = 0; k < blocks; ++k) {
    const std::uint32_t begin = sc.block_start[k], end = sc.block_start[k + 1];
    if (begin == end) continue;
    const std::size_t first_out = features.size();
    for (std::uint32_t e = begin; e < end; ++e) {
      const std::uint32_t f = sc.sorted_keys[e], local = f & kBlockMask;
      sc.block_acc[local] += sc.sorted_values[e];
      if (!sc.block_seen[local]) {
        sc.block_seen[local] = 1;
        features.push_back(f);
      }
    }
    for (std::size_t r = first_out; r < features.size(); ++r) {
      const std::uint32_t local = features[r] & kBlockMask;
      rows.push_back(sc.block_acc[local]);
      sc.block_acc[local] = 0.0f;
      sc.block_seen[local] = 0;
    }
  }
}

}  // namespace

std::int64_t WideSparseGradient::num_features() const {
  std::int64_t n = 0;
  for (const auto& part : parts) n += std::int64_t(part.features.size());
  return n;
}

// Sizes the replicas, touched bits and owner buffers for a batch of `nnz` entries on `threads`;
// returns the hot width this batch routes by (every feature for a dense enough batch, else the
// replicas' routed width) and sets `cold_owners` (0 when every feature is hot: nothing routed).
std::int64_t WideFlow::prepare_lr_buffers(std::size_t nnz, int threads, std::uint32_t& cold_owners) {
  if (std::size_t(threads) > scratch_.size()) scratch_.resize(std::size_t(threads));
  const std::int64_t hot =
      hot_ == shape_.num_features && std::int64_t(nnz) * kDenseBatchRatio < shape_.num_features ? routed_hot_ : hot_;
  while (hot_cache_.size() < std::size_t(threads)) hot_cache_.emplace_back(std::size_t(hot_));
  if (hot_bits_.size() < std::size_t(threads))
    hot_bits_.resize(std::size_t(threads), std::vector<std::uint64_t>(std::size_t((hot_ + 63) >> 6), 0));
  cold_owners = hot < shape_.num_features ? std::uint32_t(threads) : 0;
  owner_keys_.resize(cold_owners);
  owner_values_.resize(cold_owners);
  for (std::uint32_t p = 0; p < cold_owners; ++p) {
    if (owner_keys_[p].size() < nnz) owner_keys_[p].resize(nnz);
    if (owner_values_[p].size() < nnz) owner_values_[p].resize(nnz);
  }
  return hot;
}

void WideFlow::sparse_gradient_lr(const WideBatch& b, const float* params, float* logits, WidePool& pool,
                                  WideSparseGradient& out, const WideFusedUpdate* update) {
  const int threads = pool.threads();
  const std::uint32_t owners = std::uint32_t(threads);
  const std::int64_t tile = options_.tile_samples;
  const std::int64_t tiles = (b.rows + tile - 1) / tile;
  const std::size_t nnz = std::size_t(b.nnz());
  std::uint32_t cold_owners = 0;
  const std::int64_t hot = prepare_lr_buffers(nnz, threads, cold_owners);
  const std::size_t hot_words = std::size_t((hot + 63) >> 6);
  const LrBatch batch{b, tile, tiles, b.row_ptr[0], hot, owners};
  tile_owner_counts_.assign(std::size_t(tiles) * owners, 0u);
  std::vector<float> bias_grads(std::size_t(threads), 0.0f);
  out.loss_terms.resize(std::size_t(b.rows));
  double* const loss_terms = out.loss_terms.data();

  // Sample pass: replica r sums the r-th contiguous chunk of tiles: the replicas, and so the
  // merged sums, are the same run after run. Both passes are pinned (chunk r, hot range r, owner
  // p: always the same thread), so a replica, and the parameter and state rows of a hot range or
  // an owner, stay in one core's cache from step to step instead of moving with whichever thread
  // came free first. Each replica is cleared by its own thread at the start of the next sample
  // pass (the feature pass only reads the others'): a merger zeroing another core's replica took
  // its lines, which that core then fetched back to write them again.
  const std::int64_t chunks = std::min<std::int64_t>(threads, tiles);
  const std::size_t dirty_words = replica_dirty_words_;
  pool.run_pinned(threads, [&](std::int64_t chunk, int) {
    const std::size_t replica = std::size_t(chunk);
    clear_replica(hot_cache_[replica].data(), hot_bits_[replica].data(), dirty_words);
    if (chunk >= chunks) return;
    std::vector<std::uint32_t> counts(owners);
    LrRouting to{hot_cache_[replica].data(), hot_bits_[replica].data(), owner_keys_, owner_values_, counts};
    for (std::int64_t task = tiles * chunk / chunks; task < tiles * (chunk + 1) / chunks; ++task) {
      const float bias_grad = lr_sample_tile(batch, task, params, logits, loss_terms, to);
      std::copy(counts.begin(), counts.end(), tile_owner_counts_.begin() + std::ptrdiff_t(task * owners));
      bias_grads[replica] += bias_grad;
    }
  });

  // Feature pass: parts 0..ranges-1 merge the hot replicas, each over its own range of
  // features; part ranges + p is owner p's cold features. Features are numbered by frequency,
  // so touched bits thin out with the id: ranges grow quadratically (range r: words from
  // hot_words (r / ranges)^2), kRangesPerThread a thread, dealt out in turn (range r on thread
  // r % threads; owner p's part on thread p, ranges being a multiple of threads), so that the
  // threads' shares come out about even.
  const std::int64_t ranges = threads == 1 ? 1 : std::int64_t(threads) * kRangesPerThread;
  const auto range_start = [&](std::int64_t r) {
    return std::size_t(double(hot_words) * double(r) * double(r) / double(ranges * ranges));
  };
  out.parts.resize(std::size_t(ranges) + cold_owners);
  const std::uint32_t blocks = std::uint32_t((shape_.num_features + kBlockMask) >> kBlockBits);
  pool.run_pinned(ranges + std::int64_t(cold_owners), [&](std::int64_t task, int thread) {
    // Filled in locals and moved into the part once: the parts' vector headers share cache lines,
    // and a push_back through one (a store to its end pointer) for every row bounced those lines
    // between the threads.
    WideSparseGradient::Part& part = out.parts[std::size_t(task)];
    std::vector<std::uint32_t> features = std::move(part.features);
    std::vector<float> rows = std::move(part.rows);
    features.clear();
    rows.clear();
    if (task < ranges) {
      merge_hot_words(range_start(task), task + 1 == ranges ? hot_words : range_start(task + 1), threads, hot_bits_,
                      hot_cache_, features, rows);
    } else {
      const std::uint32_t p = std::uint32_t(task - ranges);
      WideTileScratch& sc = scratch_[std::size_t(thread)];
      const std::uint32_t total =
          sort_owner_entries(batch, p, blocks, tile_owner_counts_, owner_keys_[p], owner_values_[p], sc);
      reduce_blocks(blocks, total, sc, features, rows);
    }
    if (update) {
      const WideUpdateRule rule = update->rule;  // a local copy: stores to params cannot alias it
      wide_update_rows(rule, update->params, update->state, update->scale, features.data(), 0, features.size(), 1,
                       [&](std::size_t r) { return rows.data() + r; });
    }
    part.features = std::move(features);
    part.rows = std::move(rows);
  });
  replica_dirty_words_ = hot_words;
  out.bias = 0.0f;
  for (float g : bias_grads) out.bias += g;
  record_lr_stats(tiles, std::int64_t(nnz), ranges, out);
}

void WideFlow::record_lr_stats(std::int64_t tiles, std::int64_t entries, std::int64_t ranges,
                               const WideSparseGradient& out) {
  stats_ = WideFlowStats{};
  stats_.tiles = tiles;
  stats_.entries = entries;
  stats_.columns = out.num_features();
  for (std::int64_t h = 0; h < ranges; ++h)
    stats_.hot_columns += std::int64_t(out.parts[std::size_t(h)].features.size());
}

}  // namespace skew::kernels
