// wide_train's run around the per-step WideTrainer (lib/wide/trainer.hpp): the epoch loop (data
// from lib/wide/fit_data.hpp, validation logloss and AUC after every epoch, early stopping,
// saving the best model so far, progress lines, JSONL metrics, checkpoints and resume through
// lib/wide/checkpoint.hpp, stopping on a diverged model, the summary) and the --predict and
// --export modes. The options come from apps/wide_train_options.cpp; the app is a thin main
// around these, as moe_train is around lib/moe.
#pragma once
#include <memory>
#include <string>

#include "core/metrics.hpp"
#include "lib/wide/options.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

// Trains as configured, data parallel over `world` (each rank loads its slice of the rows);
// returns the summary (best validation logloss and AUC, throughput, ...), which rank 0 also
// writes to output.dir/summary.json.
Json fit(const WideOptions& options, const std::shared_ptr<comm::ProcessGroup>& world);

// --predict on one rank (lib/wide/predict.cpp): writes the probability of every row of predict.data under
// predict.model to predict.output, one per line.
void predict(const WideOptions& options, const comm::ProcessGroup& world);

// --export PATH: writes the synthetic data.train to PATH as libsvm (or, by data.format or a
// .libffm/.ffm extension, libffm) text, a block of rows at a time.
void export_data(const DataOptions& data, const std::string& path);

}  // namespace skew::wide
