// wide_train's data for fit() (lib/wide/fit.cpp): data.train loaded whole (parsed, or read from
// its binary cache) or streamed (data.max_memory_mb), data.valid, instance normalisation and
// frequency renumbering, and the model shape they call for. Prepared from the options alone:
// fit.cpp calls in here, nothing here calls back into it.
#pragma once
#include <memory>

#include "lib/wide/cache_load.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/options.hpp"
#include "lib/wide/stream.hpp"
#include "lib/wide/trainer.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

// The training and validation data, renumbered by frequency (counted over all ranks) when
// train.renumber is set, and the model shape they call for.
struct Data {
  SparseDataset train, valid;                              // train: empty but for num_features/num_fields when streamed
  bool streamed = false;                                   // data.train streams (data.max_memory_mb)
  std::unique_ptr<ChunkStream> stream;                     // its ring: null between the first pass and training_stream
  bool stream_cached = false;                              // its epochs read its binary cache (checked or written)
  std::int64_t max_row_nonzeros = 0;                       // streamed: the most nonzeros of a training row
  std::int64_t stream_first_row = 0, stream_last_row = 0;  // streamed: this rank's rows of the file
  std::int64_t stream_held_bytes = 0;                      // streamed: what the run holds outside the ring (RunMemory)
  std::int64_t train_rows = 0;                             // this rank's
  // data.train loading while training (data.load_overlap): its arrays are sized, its rows come in
  // once start_overlapped_load() has run; null once settled (settle_overlapped_load) or never.
  std::unique_ptr<OverlappedLoad> overlapped;
  bool load_overlapped = false;  // data.train loaded beside the first epoch (overlapped was set)
  double load_wait_seconds = 0;  // how long training waited for its rows (counted apart from it)
  ReadOptions read;              // data.* as read
  bool has_valid = false;
  ReadReport report;  // of the training data
  kernels::WideShape shape;
  bool renumber = false;
  FeatureOrder order;
  bool normalize = false;  // train.normalize resolved for the model type
  // Per model row, 1 where this run's data reads it (WideModel::create defers the other latent
  // rows): every rank's training rows and this rank's validation rows. Empty: every row.
  std::vector<std::uint8_t> rows_read;
};

// The data.* keys as reader options for this rank of `world`, parsing with `threads`.
ReadOptions read_options(const DataOptions& data, const comm::ProcessGroup& world, int threads);

// Loads data.train (or scans it, when it streams) and data.valid for this rank of `world`,
// parsing with train.threads; normalises and renumbers them as configured. Collective (renumbering
// counts features over all ranks). With `overlap_allowed` and data.load_overlap's conditions
// met, data.train's rows are left to Data::overlapped (start_overlapped_load).
Data load_data(const WideOptions& options, comm::ProcessGroup& world, bool overlap_allowed);
// Starts d.overlapped's thread, normalising and renumbering as load_data would have: `d` must
// stay where it is until it settles.
void start_overlapped_load(Data& d);
// Waits for d.overlapped's whole load and lets it go: throws DamagedCacheError when the cache
// failed its checksum, or the error of the check its rows failed. Nothing when none runs.
void settle_overlapped_load(Data& d);

// Data::rows_read for `d` (shape, train, valid and order set): empty for LR. `occurring`: when
// the features were renumbered by frequency, how many of them the training rows of all ranks
// hold (the renumbered rows [0, occurring)); else -1, and the rows are those the training data
// reads, collectively: a step updates the union of the ranks' rows on every rank, so each rank's
// model needs every rank's training rows (a streamed file's rows are not held: every row counts
// as read and the result is empty). This rank's validation rows are added either way.
std::vector<std::uint8_t> model_rows_read(const Data& d, comm::ProcessGroup& world, std::int64_t occurring);

// The training ring for a streamed data.train: its slots share what data.max_memory_mb leaves
// after `baseline_bytes` (the process's resident memory measured before the model was made), the
// trainer's parameters, their gradient, the optimizer's state, the step's buffers and, with
// `keeps_best_copy`, a copy of the parameters (lib/wide/memory_budget.hpp); each chunk is
// normalised and renumbered as the whole load is.
std::unique_ptr<StreamBatches> training_stream(const DataOptions& options, Data& data, WideTrainer& trainer,
                                               std::int64_t batch, std::int64_t baseline_bytes, bool keeps_best_copy);

}  // namespace skew::wide
