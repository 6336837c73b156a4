// Flow schema for FM on the CPU (WideFlow::sparse_gradient_fm; see kernels/wide_flow.hpp): a
// sample pass over chunks of tiles, where each tile is re-sorted into a feature-oriented CSC,
// gathered and applied, its samples' partial sums and gradients kept for the batch; then a
// feature pass where each owner scatters the columns of its own features, over every tile in
// batch order, into compact rows of its own and (fused) applies them. No gradient row is written
// by one core and read by another, no feature is claimed by two threads, and a feature's sums
// come in tile order whatever the thread count: every thread count gives the 1-thread model.
#include <algorithm>

#include "kernels/cpu/wide_scratch_row.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_update.hpp"

namespace skew::kernels {

namespace {

// Columns of a tile are distinct features in id order, so their rows are scattered over the
// parameter array: fetch the rows this many columns ahead.
constexpr std::size_t kColumnPrefetch = 8;

// Owners take features in blocks of 16: the block's slot tags fill two cache lines, and its
// parameter rows (16 x row_len floats) share a line with the next block's only at the boundary.
constexpr int kOwnerBlockBits = 4;

inline std::uint32_t feature_owner(std::uint32_t feature, std::uint32_t owners) {
  const std::uint32_t block = feature >> kOwnerBlockBits;
  return (owners & (owners - 1)) == 0 ? block & (owners - 1) : block % owners;  // no division for 2^n
}

// The tile's columns grouped by owner, in column order within each: owner o's are
// owner_columns[owner_begin[o], owner_begin[o + 1]).
void group_columns_by_owner(WideTileScratch& t, std::uint32_t owners) {
  t.owner_begin.assign(std::size_t(owners) + 1, 0u);
  for (const std::uint32_t f : t.col_feature) ++t.owner_begin[feature_owner(f, owners) + 1];
  for (std::uint32_t o = 0; o < owners; ++o) t.owner_begin[o + 1] += t.owner_begin[o];
  t.owner_columns.resize(t.col_feature.size());
  t.owner_cursor.assign(t.owner_begin.begin(), t.owner_begin.end() - 1);
  for (std::uint32_t c = 0; c < std::uint32_t(t.col_feature.size()); ++c)
    t.owner_columns[t.owner_cursor[feature_owner(t.col_feature[c], owners)]++] = c;
}

// Each entry's sample (within the tile) and value in CSC order: the gather and the owners'
// scatter then read them in sequence, an owner only the lines of its own columns.
void entries_in_column_order(const WideBatch& b, std::int64_t first, std::int64_t last, WideTileScratch& t) {
  const std::int64_t base = b.row_ptr[first];
  const std::size_t n = std::size_t(b.row_ptr[last] - base);
  std::vector<std::uint32_t>& sample_of_entry = t.keys_tmp;  // the sort's scratch, free now
  for (std::int64_t i = first; i < last; ++i)
    for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e)
      sample_of_entry[std::size_t(e - base)] = std::uint32_t(i - first);
  t.entry_sample.resize(n);
  t.entry_value.resize(n);
  for (std::size_t e = 0; e < n; ++e) {
    const std::uint32_t entry = t.order[e];
    t.entry_sample[e] = sample_of_entry[entry];
    t.entry_value[e] = b.value[base + entry];
  }
}

// Gather (feature -> sample) over the tile's CSC and apply per sample: the samples' partial
// sums go to `acc` and their loss gradients to `grad` (both indexed from the tile's first
// sample). Returns the tile's bias gradient.
float gather_apply_tile(const FmProgram& prog, const WideShape& s, const WideBatch& b, std::int64_t first,
                        std::int64_t last, const float* params, const WideTileScratch& t, float* acc, float* grad,
                        float* logits) {
  const int row_len = s.row_len(), acc_len = prog.acc_len();
  const std::size_t samples = std::size_t(last - first), columns = t.col_feature.size();
  std::fill(acc, acc + samples * std::size_t(acc_len), 0.0f);
  for (std::size_t c = 0; c < columns; ++c) {
    if (c + kColumnPrefetch < columns)
      wide_prefetch_row(params + 1 + std::int64_t(t.col_feature[c + kColumnPrefetch]) * row_len, row_len);
    const float* row = params + 1 + std::int64_t(t.col_feature[c]) * row_len;
    for (std::uint32_t e = t.col_begin[c]; e < t.col_begin[c + 1]; ++e)
      prog.gather(row, t.entry_value[e], acc + std::size_t(t.entry_sample[e]) * acc_len);
  }
  float bias_grad = 0.0f;
  for (std::size_t i = 0; i < samples; ++i) {
    const float z = prog.apply(acc + i * acc_len, params[0]);
    logits[first + std::int64_t(i)] = z;
    grad[i] = wide_sigmoid(z) - b.label[first + std::int64_t(i)];
    bias_grad += grad[i];
  }
  return bias_grad;
}

// What the FM feature pass reads: the batch's tiles, its samples' partial sums and loss
// gradients, the owners' slot tags and this batch's tag id.
struct FmOwnerPass {
  const FmProgram& prog;
  const float* params;
  const std::vector<WideTileScratch>& tiles_csc;
  const float* sample_acc;
  const float* sample_grad;
  std::uint64_t* owner_tags;
  std::int64_t tiles, tile;
  std::uint64_t batch;
  int row_len, acc_len;
};

// Owner `owner` scatters the columns of its features, tile after tile, into its rows: one row per
// distinct feature (`features[r]`'s row is rows[r * row_len ...]), claimed at its first column.
void scatter_owner_columns(const FmOwnerPass& s, std::uint32_t owner, std::vector<std::uint32_t>& features,
                           std::vector<float>& rows) {
  const int row_len = s.row_len;
  // Allocated here, by the thread that writes it once per entry: a scratch row allocated by
  // another thread could share a cache line with that thread's (72 bytes each, from one arena).
  // Its latent part on a cache line: the entry loop loads and stores it 16 bytes at a time, and
  // malloc put the worker thread's row across a 4 KiB page (at 4064 mod 4096), which made the
  // worker's pass 1.5x the caller's (kernels/cpu/wide_scratch_row.hpp).
  std::vector<float> row_grad_storage(static_cast<std::size_t>(row_len) + kWideScratchRowSlack);
  float* const row_grad = wide_row_with_latent_on_line(row_grad_storage.data());
  for (std::int64_t t = 0; t < s.tiles; ++t) {
    const WideTileScratch& csc = s.tiles_csc[std::size_t(t)];
    const std::int64_t first = t * s.tile;
    const float* acc = s.sample_acc + std::size_t(first) * std::size_t(s.acc_len);
    const float* grad = s.sample_grad + first;
    const std::uint32_t mine_end = csc.owner_begin[owner + 1];
    for (std::uint32_t k = csc.owner_begin[owner]; k < mine_end; ++k) {
      if (k + kColumnPrefetch < mine_end)
        wide_prefetch_row(
            s.params + 1 + std::int64_t(csc.col_feature[csc.owner_columns[k + kColumnPrefetch]]) * row_len, row_len);
      const std::uint32_t c = csc.owner_columns[k], feature = csc.col_feature[c];
      const float* row = s.params + 1 + std::int64_t(feature) * row_len;
      std::fill(row_grad, row_grad + row_len, 0.0f);
      for (std::uint32_t e = csc.col_begin[c]; e < csc.col_begin[c + 1]; ++e) {
        const std::uint32_t i = csc.entry_sample[e];
        s.prog.scatter(row, csc.entry_value[e], acc + std::size_t(i) * s.acc_len, grad[i], row_grad);
      }
      // The feature's slot in this owner's rows: claimed (its row zeroed) at its first column.
      std::uint64_t& tag = s.owner_tags[feature];
      if ((tag >> 32) != s.batch) {
        tag = (s.batch << 32) | features.size();
        features.push_back(feature);
        rows.resize(rows.size() + std::size_t(row_len));
      }
      float* sum = rows.data() + std::size_t(std::uint32_t(tag)) * std::size_t(row_len);
      for (int j = 0; j < row_len; ++j) sum[j] += row_grad[j];
    }
  }
}

}  // namespace

void WideFlow::sparse_gradient_fm(const WideBatch& b, const float* params, float* logits, WidePool& pool,
                                  WideSparseGradient& out, const WideFusedUpdate* update) {
  const FmProgram prog{shape_.k};
  const int row_len = shape_.row_len(), acc_len = prog.acc_len();
  const std::int64_t tile = options_.tile_samples;
  const std::int64_t tiles = (b.rows + tile - 1) / tile;
  if (std::int64_t(tile_csc_.size()) < tiles) tile_csc_.resize(std::size_t(tiles));
  sample_acc_.resize(std::size_t(b.rows) * std::size_t(acc_len));
  sample_grad_.resize(std::size_t(b.rows));

  const std::uint32_t owners = std::uint32_t(pool.threads());
  // Sample pass: one contiguous chunk of tiles per thread.
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min<std::int64_t>(pool.threads(), tiles));
  // Per tile, summed in tile order below: the same sum whatever the chunks.
  std::vector<float> tile_bias_grads(std::size_t(tiles), 0.0f);
  std::vector<WideFlowStats> stats(static_cast<std::size_t>(chunks));
  pool.run_pinned(chunks, [&](std::int64_t chunk, int) {
    WideFlowStats mine;  // stored once: the chunks' stats share a cache line
    for (std::int64_t t = tiles * chunk / chunks; t < tiles * (chunk + 1) / chunks; ++t) {
      const std::int64_t first = t * tile, last = std::min(b.rows, first + tile);
      WideTileScratch& csc = tile_csc_[std::size_t(t)];
      build_tile_csc(b, first, last, csc);
      entries_in_column_order(b, first, last, csc);
      group_columns_by_owner(csc, owners);
      tile_bias_grads[std::size_t(t)] = gather_apply_tile(
          prog, shape_, b, first, last, params, csc, sample_acc_.data() + std::size_t(first) * std::size_t(acc_len),
          sample_grad_.data() + first, logits);
      mine.entries += b.row_ptr[last] - b.row_ptr[first];
      mine.columns += std::int64_t(csc.col_feature.size());
      for (const std::uint32_t f : csc.col_feature) mine.hot_columns += f < hot_;
    }
    stats[std::size_t(chunk)] = mine;
  });

  // Feature pass: owner o scatters the columns of its features, tile after tile, into its part.
  // The batch id takes the tag's top 32 bits (the slot the low 32): when it wraps, every tag is
  // cleared once.
  if (++owner_batch_ == (std::uint64_t(1) << 32)) {
    std::fill(owner_tags_.begin(), owner_tags_.end(), std::uint64_t(0));
    owner_batch_ = 1;
  }
  const std::uint64_t batch = owner_batch_;
  out.parts.resize(owners);
  const FmOwnerPass pass{
      prog,  params,  tile_csc_, sample_acc_.data(), sample_grad_.data(), owner_tags_.data(), tiles, tile,
      batch, row_len, acc_len};
  pool.run_pinned(owners, [&](std::int64_t task, int) {
    const std::uint32_t owner = std::uint32_t(task);
    // Filled in locals and moved into the part once: the parts' vector headers share lines.
    WideSparseGradient::Part& part = out.parts[std::size_t(owner)];
    std::vector<std::uint32_t> features = std::move(part.features);
    std::vector<float> rows = std::move(part.rows);
    features.clear();
    rows.clear();
    part.partial_rows.clear();
    scatter_owner_columns(pass, owner, features, rows);
    if (update) {
      const WideUpdateRule rule = update->rule;  // a local copy: stores to params cannot alias it
      wide_update_rows(rule, update->params, update->state, update->scale, features.data(), 0, features.size(),
                       std::size_t(row_len), [&](std::size_t r) { return rows.data() + r * std::size_t(row_len); });
    }
    part.features = std::move(features);
    part.rows = std::move(rows);
  });

  out.bias = 0.0f;
  for (const float g : tile_bias_grads) out.bias += g;
  stats_ = WideFlowStats{};
  stats_.tiles = tiles;
  for (std::size_t c = 0; c < std::size_t(chunks); ++c) {
    stats_.entries += stats[c].entries;
    stats_.columns += stats[c].columns;
    stats_.hot_columns += stats[c].hot_columns;
  }
}

}  // namespace skew::kernels
