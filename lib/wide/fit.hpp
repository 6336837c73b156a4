// wide_train's run around the per-step WideTrainer (lib/wide/trainer.hpp): its schema, the epoch
// loop (data loading and frequency renumbering, validation logloss and AUC after every epoch,
// early stopping, saving the best model so far, progress lines, JSONL metrics, checkpoints and
// resume through lib/wide/checkpoint.hpp, stopping on a diverged model, the summary) and the
// --predict mode. The app is a thin main around these, as moe_train is around lib/moe.
#pragma once
#include <memory>

#include "core/config.hpp"
#include "core/metrics.hpp"
#include "lib/wide/dataset.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

// Model rows are 32-bit in the kernels, and a model this wide is already 2^28 rows: beyond it
// the data should be hashed into fewer rows (data.hash_bits <= kMaxHashBits = 28).
constexpr std::int64_t kMaxModelFeatures = std::int64_t(1) << kMaxHashBits;
// data.max_memory_mb's ceiling, 16 TiB: past any machine's memory, and MiB << 20 stays far
// inside int64.
constexpr std::int64_t kMaxMemoryMb = std::int64_t(1) << 24;

Schema wide_train_schema();  // lib/wide/schema.cpp

// Trains as configured, data parallel over `world` (each rank loads its slice of the rows);
// returns the summary (best validation logloss and AUC, throughput, ...), which rank 0 also
// writes to output.dir/summary.json.
Json fit(const Config& config, const std::shared_ptr<comm::ProcessGroup>& world);

// The data.* keys as reader options for this rank of `world`, parsing with `threads`.
ReadOptions read_options(const Config& config, const comm::ProcessGroup& world, int threads);

// --predict on one rank (lib/wide/predict.cpp): writes the probability of every row of predict.data under
// predict.model to predict.output, one per line.
void predict(const Config& config, const comm::ProcessGroup& world);

// --export PATH: writes the synthetic data.train to PATH as libsvm (or, by data.format or a
// .libffm/.ffm extension, libffm) text, a block of rows at a time.
void export_data(const Config& config, const std::string& path);

}  // namespace skew::wide
