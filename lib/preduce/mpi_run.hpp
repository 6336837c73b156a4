// One process's part of an MPI run (trainer.cpp), shared with its report (mpi_report.cpp):
// its worker (none on a dedicated controller rank) and what it carries from one segment to the
// next. A segment ends at a checkpoint step, where every worker stops, the controller and the
// communication threads drain, and the state is saved, so a checkpoint is never taken while a
// group or an averaging is in flight. Internal to lib/preduce.
#pragma once
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/metrics.hpp"
#include "lib/preduce/progress.hpp"
#include "lib/preduce/sync/sync_mode.hpp"
#include "lib/preduce/task.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/preduce_controller.hpp"

namespace skew::preduce {

struct MpiRun {
  explicit MpiRun(const TrainOptions& options) : opt(options), mode(make_sync_mode(opt)) {}
  TrainOptions opt;                // a copy: preduce.group_size = 0 (auto) is resolved into it
  std::unique_ptr<SyncMode> mode;  // reads opt
  bool auto_group = false;         // the group size was measured ...
  double warmup_s = 0.0;           // ... in a warm-up window this long (its slowest worker's)
  bool dedicated = false;          // world rank 0 is the controller only
  int n = 0, id = -1;              // workers; this rank's worker
  std::unique_ptr<Task> task;
  std::unique_ptr<Worker> me;
  WorkerProgress progress;
  comm::FormerState controller;             // world rank 0
  std::unique_ptr<comm::PartialReduce> pr;  // the last segment's (its worker group ends the run)
  std::shared_ptr<comm::ProcessGroup> workers;
  std::unique_ptr<JsonlWriter> metrics;
  // The segment's models on the evaluation grid, with the grid points each covers.
  std::vector<std::pair<std::vector<float>, std::size_t>> snapshots;
};

// Collective over the workers once training is done: the curve, the average model and the
// summary on worker 0, nothing elsewhere.
std::optional<RunResult> report(MpiRun& run);

}  // namespace skew::preduce
