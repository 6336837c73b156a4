// The flow schema (cuWide): a mini-batch is a bigraph of sample and feature vertices, and one
// training step is three passes over it, written as small vertex programs:
//   gather  (feature -> sample)  each feature column adds its contribution to the partial sums
//                                 of the samples it touches (the Aggregate phase),
//   apply   (sample)              turns a sample's partial sums into its logit and loss gradient,
//   scatter (sample -> feature)  each feature column collects the gradient of its row from the
//                                 samples it touches (the Apply phase).
// Layout: the batch is cut into tiles of `tile_samples` samples; each tile is re-sorted by
// feature id (LSD radix sort; CUB DeviceSegmentedRadixSort on the GPU) into a feature-oriented
// CSC, so a feature's row is read once per tile and its gradient written once per tile. Features
// are renumbered by frequency beforehand (the trainer does it), so ids below `hot_features` are
// the hottest: the CSC's leading columns. Their gradients accumulate in a per-thread cache (the
// replicated accumulators: one copy per thread, on the GPU several per block in shared memory)
// across the whole stage and reach the global array in one reduction; colder columns are written
// with one atomic add per weight per tile. Tile x {hot, cold} columns is the 2D partition (the
// CUDA twin's; see below for the CPU's).
// On the CPU every model hands the optimizer its gradient in feature-row form (sparse_gradient):
// the batch's distinct features and one gradient row each, no model-sized array, no atomics.
// FM (sparse_gradient_fm): the sample pass builds, gathers and applies the tiles in contiguous
// chunks, one per thread, keeping every tile's CSC and the samples' partial sums and gradients;
// the feature pass gives each thread the features of its own blocks of 16 ids (their owner), over
// every tile in batch order: it scatters their columns into its own compact rows (slots it
// claims alone, no atomics) and, on one rank, applies the optimizer to them. No gradient row crosses
// between cores, and each feature's sums come in tile order: every thread count gives the
// 1-thread model. FFM: the tiles are dealt out in contiguous chunks, one per thread; a first pass
// numbers the batch's distinct features (slots: WideFeatureSlots, each chunk claiming those of
// its entries), a second has each chunk add its gradients with plain stores into its own compact
// array of slot rows (zeroed by the chunk itself, so it is in the thread's cache when the
// scatter starts); the optimizer sums the chunks' rows in chunk order as it updates each row. A
// thread count gives the same result run after run, and one thread the sums the dense path
// gave. FFM (the pairwise term does not factor into per-feature partial sums) keeps sample
// order inside a tile. LR has one weight per row, so a per-tile sort costs more than it saves;
// instead its flow is one sample pass and one feature pass (sparse_gradient_lr): the sample pass
// gathers, applies, and routes each entry's gradient either into the thread's replicated hot
// cache (marking the feature in the thread's touched bits) or, for a cold feature, into the
// buffer of the thread that owns the feature (features are dealt out by blocks of 64, so owners
// never share a line, nor a pair of lines); the feature pass has each thread merge the hot
// replicas over its own range of features, and each owner counting-sort its entries into blocks
// of 2048 features
// (8 KB of accumulators: L1-sized) and reduce them there, emitting one row per touched feature.
// When a replica of every feature per thread fits `replica_budget_bytes` (a model that the
// last-level cache holds) and a batch's entries number at least 1/kDenseBatchRatio of the
// features, every feature is hot and nothing is routed. The optimizer then walks
// the touched rows in feature order. The CUDA twin sorts the tiles of LR and FM; its FFM keeps
// sample order too (a warp per sample).
#pragma once
#include <cstdint>
#include <vector>

#include "core/host_device.hpp"
#include "core/zero_pages.hpp"
#include "kernels/wide_model.hpp"
#include "kernels/wide_pool.hpp"

namespace skew::kernels {

// Vertex programs. `acc` is one sample's partial sums (acc_len floats); `row` a feature's
// parameter row; `grad_row` its gradient row (row_len floats).
struct LrProgram {
  int k;
  SKEW_HD int acc_len() const { return 1; }
  SKEW_HD void gather(const float* row, float x, float* acc) const { acc[0] += row[0] * x; }
  SKEW_HD float apply(const float* acc, float bias) const { return bias + acc[0]; }
  SKEW_HD void scatter(const float*, float x, const float*, float g, float* grad_row) const { grad_row[0] += g * x; }
};

// acc = [linear sum, sum of squares, s_1..s_k] with s_f = sum_j v_jf x_j.
struct FmProgram {
  int k;
  SKEW_HD int acc_len() const { return 2 + k; }
  SKEW_HD void gather(const float* row, float x, float* acc) const {
    acc[0] += row[0] * x;
    float squares = 0.0f;
    for (int f = 0; f < k; ++f) {
      const float vx = row[1 + f] * x;
      acc[2 + f] += vx;
      squares += vx * vx;
    }
    acc[1] += squares;
  }
  SKEW_HD float apply(const float* acc, float bias) const {
    float interaction = -acc[1];
    for (int f = 0; f < k; ++f) interaction += acc[2 + f] * acc[2 + f];
    return bias + acc[0] + 0.5f * interaction;
  }
  SKEW_HD void scatter(const float* row, float x, const float* acc, float g, float* grad_row) const {
    const float gx = g * x;
    grad_row[0] += gx;
    for (int f = 0; f < k; ++f) grad_row[1 + f] += gx * (acc[2 + f] - row[1 + f] * x);
  }
};

struct WideFlowOptions {
  int tile_samples = 256;            // samples per tile (the sample side of the 2D partition)
  std::int64_t hot_features = 4096;  // ids below this get cached, replicated accumulators
  // LR on the CPU: when one replica per thread of every feature's gradient (threads x features x
  // 4 B) fits in this budget (the last-level cache), every feature is hot in a batch dense in
  // them (WideFlow::kDenseBatchRatio): no entry is routed to an owner, and the feature pass only
  // merges the replicas.
  std::int64_t replica_budget_bytes = std::int64_t(16) << 20;
};

struct WideFlowStats {
  std::int64_t tiles = 0, entries = 0, columns = 0, hot_columns = 0;
};

// Per-tile scratch: the tile's CSC (FM keeps one per tile of the batch; LR one per thread for
// its feature pass).
struct WideTileScratch {
  std::vector<std::uint32_t> keys, keys_tmp, order, order_tmp, counts;
  std::vector<std::uint32_t> col_feature, col_begin;
  // FM: each entry's sample within the tile and its value, in column order; the columns grouped
  // by owner (group_columns_by_owner).
  std::vector<std::uint32_t> entry_sample, owner_begin, owner_columns, owner_cursor;
  std::vector<float> entry_value;
  // LR feature pass: the owner's entries counting-sorted by block, the block's accumulators.
  std::vector<std::uint32_t> block_start, sorted_keys, block_features;
  std::vector<float> sorted_values, block_acc;
  std::vector<std::uint8_t> block_seen;
};

// A batch gradient in feature-row form: the distinct features the batch touched and their
// gradient rows (row_len floats each), in parts whose features are disjoint, so that the parts
// can be applied in parallel.
struct WideSparseGradient {
  struct Part {
    std::vector<std::uint32_t> features;
    std::vector<float> rows;
    // Further addends of `rows`, laid out like it (FM/FFM: the second and later chunks' sums).
    std::vector<std::vector<float>> partial_rows;
    // Row r with the partial rows added into it, in order: the row's gradient.
    float* folded_row(std::size_t r, std::size_t row_len) {
      float* row = rows.data() + r * row_len;
      for (const std::vector<float>& partial : partial_rows) {
        const float* add = partial.data() + r * row_len;
        for (std::size_t j = 0; j < row_len; ++j) row[j] += add[j];
      }
      return row;
    }
  };
  float bias = 0.0f;
  std::vector<Part> parts;
  // LR: each sample's logloss term (wide_logloss_term), in sample order, computed where its logit
  // is (no pass of its own); FM and FFM leave it empty.
  std::vector<double> loss_terms;
  std::int64_t num_features() const;
};

// FM/FFM on the CPU: the batch's distinct features numbered 0..n-1 (slots), found by the chunks
// in parallel. A feature's tag holds the id of the batch that last claimed it, the chunk that
// did and the feature's place in that chunk's list, so nothing is cleared between batches; the
// first chunk to swap in the batch's id claims the feature. The slots depend on which chunk came
// first, the sums in a slot's row do not.
class WideFeatureSlots {
 public:
  void resize(std::int64_t num_features) { tags_.resize(std::size_t(num_features)); }
  // A new batch whose features `chunks` chunks (at most kMaxChunks) will claim.
  void start_batch(std::size_t chunks);
  // Claims for `chunk` every feature of entries [begin, end) that no chunk has claimed in this
  // batch; the chunks call this concurrently.
  void claim(const WideBatch& b, std::int64_t begin, std::int64_t end, std::uint32_t chunk);
  // After every claim: numbers the chunks' lists one after another; the number of slots.
  std::size_t finish();
  // Chunk `chunk`'s features, written to their slots of `features` (n long).
  void write_features(std::uint32_t chunk, std::uint32_t* features) const;
  std::uint32_t slot(std::uint32_t feature) const {
    const std::uint64_t tag = tags_[feature];
    return offset_[(tag >> kChunkShift) & (kMaxChunks - 1)] + std::uint32_t(tag);
  }
  static constexpr std::size_t kMaxChunks = 256;

 private:
  static constexpr int kChunkShift = 32, kBatchShift = 40;  // tag: batch id | chunk | place
  ZeroPageVector<std::uint64_t> tags_;
  std::uint64_t batch_ = 0;
  std::vector<std::vector<std::uint32_t>> claimed_;
  std::vector<std::uint32_t> offset_;
};

struct WideFusedUpdate;  // kernels/wide_update.hpp

class WideFlow {
 public:
  WideFlow(const WideShape& shape, const WideFlowOptions& options, int threads);
  // Same contract as wide_classical_gradient: grad += batch gradient, logits filled.
  void gradient(const WideBatch& batch, const float* params, float* grad, float* logits, WidePool& pool);
  // The same gradient in feature-row form; `out` is reused. With `update` (and fuses_update()),
  // each part's rows are also applied to update->params (the same model as `params`) by the task
  // that completed them, and zeroed; the bias's gradient is left to the caller.
  void sparse_gradient(const WideBatch& batch, const float* params, float* logits, WidePool& pool,
                       WideSparseGradient& out, const WideFusedUpdate* update = nullptr);
  // Whether sparse_gradient applies a fused update (LR and FM; FFM folds its chunks' partial
  // rows first, which the optimizer does).
  bool fuses_update() const { return shape_.kind != WideKind::FFM; }
  const WideFlowStats& last_stats() const { return stats_; }
  // The replicas' width (LR: every feature when they fit the budget), for memory accounting.
  std::int64_t hot_features() const { return hot_; }
  // LR: a batch with fewer entries than features / kDenseBatchRatio keeps only the hottest
  // `hot_features` option's features in the replicas even when every feature's would fit: its
  // touched bits are sparse, so merging every feature's replicas walks mostly empty words and the
  // replicas' scattered lines move between the cores. On issue 16's 1.9M-feature file (39
  // entries a row, 47 features per batch entry) every feature hot ran 0.8x routed at 1 thread
  // and 0.7x at 2; on SpamAssassin (2^20 features, 750 entries a row, 2.7) 1.5x and 1.2x.
  static constexpr std::int64_t kDenseBatchRatio = 8;

 private:
  void build_tile_csc(const WideBatch& batch, std::int64_t first, std::int64_t last, WideTileScratch& t) const;
  void sparse_gradient_lr(const WideBatch& batch, const float* params, float* logits, WidePool& pool,
                          WideSparseGradient& out, const WideFusedUpdate* update);
  std::int64_t prepare_lr_buffers(std::size_t nnz, int threads, std::uint32_t& cold_owners);
  void record_lr_stats(std::int64_t tiles, std::int64_t entries, std::int64_t ranges, const WideSparseGradient& out);
  void sparse_gradient_fm(const WideBatch& batch, const float* params, float* logits, WidePool& pool,
                          WideSparseGradient& out, const WideFusedUpdate* update);
  void sparse_gradient_ffm(const WideBatch& batch, const float* params, float* logits, WidePool& pool,
                           WideSparseGradient& out);
  WideShape shape_;
  WideFlowOptions options_;
  std::int64_t hot_;
  std::int64_t routed_hot_;               // LR: the replicas' width used for a sparse batch
  std::vector<WideTileScratch> scratch_;  // one per thread
  // LR: one replica per thread of hot_ floats, as zero pages: a replica of every feature (7.6 MB
  // for 1.9M) costs nothing until a batch writes it, and a sparse batch writes only its first
  // `hot_features` (zero-filled vectors took 8 ms of a 0.085 s set-up, a 5th of an epoch).
  std::vector<ZeroPageVector<float, false>> hot_cache_;
  WideFlowStats stats_;
  // LR: per replica, a bit per hot feature it touched (cleared with it by its thread); per owner,
  // the cold entries each tile routed to it (tile t writes from its first entry's offset) and the
  // per-(tile, owner) counts.
  std::vector<std::vector<std::uint64_t>> hot_bits_;
  std::size_t replica_dirty_words_ = 0;  // words of hot_bits_ (and their replicas) the last step set
  std::vector<std::vector<std::uint32_t>> owner_keys_;
  std::vector<std::vector<float>> owner_values_;
  std::vector<std::uint32_t> tile_owner_counts_;
  WideFeatureSlots slots_;  // FFM: the batch's distinct features
  // FM: the batch's tiles (CSC and each entry's sample), its samples' partial sums and loss
  // gradients; per feature, the batch that last claimed it (high 32 bits) and its slot in its
  // owner's rows (low 32), written only by the feature's owner.
  std::vector<WideTileScratch> tile_csc_;
  std::vector<float> sample_acc_, sample_grad_;
  ZeroPageVector<std::uint64_t> owner_tags_;
  std::uint64_t owner_batch_ = 0;
  WideSparseGradient sparse_;  // gradient() goes through it
};

// LSD radix sort of (key, value) pairs on the low `bits` bits of key, 11 bits a pass; stable.
// `counts` holds kWideRadixBuckets.
constexpr std::size_t kWideRadixBuckets = std::size_t(1) << 11;
void wide_radix_sort_pairs(std::uint32_t* keys, std::uint32_t* values, std::size_t n, int bits, std::uint32_t* keys_tmp,
                           std::uint32_t* values_tmp, std::uint32_t* counts);

#if defined(SKEW_WITH_CUDA)
// CUDA twin of WideFlow::gradient: device pointers; the batch's entries are [base, base + nnz)
// (known on the host, so nothing is read back). LR and FM: the batch's hot/cold segmented CSC
// is built with cub::DeviceSegmentedRadixSort, each warp reduces the runs of equal features in
// its window of sorted entries, hot rows accumulate in shared memory and are written with one
// atomic per weight per tile. FFM: one warp per sample, its linear terms and pairs spread evenly
// over the lanes, hot rows in shared memory (kernels/cuda/wide_ffm.cu).
void wide_flow_gradient_cuda(const WideShape& shape, const WideFlowOptions& options, const WideBatch& batch,
                             std::int64_t base, std::int64_t nnz, const float* params, float* grad, float* logits,
                             void* stream);
#endif

}  // namespace skew::kernels
