// wide_train's run around the per-step WideTrainer (lib/wide/trainer.hpp): its schema, the epoch
// loop (data loading and frequency renumbering, validation logloss and AUC after every epoch,
// early stopping, saving the best model so far, progress lines, JSONL metrics, checkpoints and
// resume through lib/wide/checkpoint.hpp, stopping on a diverged model, the summary) and the
// --predict mode. The app is a thin main around these, as moe_train is around lib/moe.
#pragma once
#include <memory>

#include "lib/core/config.hpp"
#include "lib/core/metrics.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

Schema wide_train_schema();

// Trains as configured, data parallel over `world` (each rank loads its slice of the rows);
// returns the summary (best validation logloss and AUC, throughput, ...), which rank 0 also
// writes to output.dir/summary.json.
Json fit(const Config& config, const std::shared_ptr<comm::ProcessGroup>& world);

// --predict on one rank: writes the probability of every row of predict.data under
// predict.model to predict.output, one per line.
void predict(const Config& config, const comm::ProcessGroup& world);

}  // namespace skew::wide
