// wide_train's resume: the run's position and sums (WideRunState) and the trainer's model and
// optimizer state, saved through CheckpointDir (core/checkpoint.hpp) at epoch ends and every
// output.checkpoint_interval steps, and restored with output.resume.
//
// The epoch loop reads the training rows in order (no shuffle, no random state), so the step
// within the epoch is the whole reader position. At train.threads = 1 a resumed run is bit-exact
// against a straight one (weights, optimizer state, metrics, summary). With threads > 1 the
// Hogwild updates are not deterministic even without a resume: the saved state is exact, the
// continuation is not bit-reproducible. train.device = cuda keeps its state on the GPU and is
// not checkpointed: the checkpoint keys are refused with it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/checkpoint.hpp"
#include "lib/wide/options.hpp"
#include "lib/wide/trainer.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

// Where the epoch loop is and what it has summed: everything besides the trainer's state that a
// resumed run needs to continue as the straight run would.
struct WideRunState {
  std::int64_t epoch = 1;          // the epoch in progress (1-based); epochs + 1 once all ran
  std::int64_t step_in_epoch = 0;  // steps of it already taken
  std::int64_t global_step = 0;
  // The epoch in progress: its loss sum and samples (the epoch record's train_logloss), the
  // progress window not yet reported, and the seconds it trained before the checkpoint.
  double epoch_loss_sum = 0, window_loss = 0, epoch_seconds = 0;
  std::int64_t epoch_samples = 0, window_steps = 0;
  // Early stopping and the summary.
  double best_loss = 1e300, best_auc = 0.5, train_seconds = 0;
  std::int64_t best_epoch = 0, since_best = 0, epochs_run = 0, total_samples = 0, total_nonzeros = 0;
};

// What a checkpoint must share with the run resuming from it, as (what to name, value): the
// model's kind and shape, the optimizer (its state's layout), the feature numbering and the
// steps per epoch (the meaning of the saved step).
using RunIdentity = std::map<std::string, std::string>;

// The output keys' own rules (resume needs a directory; checkpoints are the CPU trainer's),
// which fit() checks before it loads any data.
void check_checkpoint_options(const OutputOptions& output, TrainDevice device);

class WideCheckpoint {
 public:
  // Disabled when output.checkpoint_dir is empty. Refuses the checkpoint keys with
  // train.device = cuda, naming them.
  WideCheckpoint(const OutputOptions& output, TrainDevice device, comm::ProcessGroup& world, RunIdentity identity);
  bool enabled() const { return dir_ != nullptr; }
  // output.checkpoint_interval: steps between mid-epoch checkpoints (0 = epoch ends only).
  std::int64_t interval() const { return interval_; }

  // With output.resume and a complete checkpoint: loads the newest step that verifies on every
  // rank into `trainer` and `state` and returns true; a damaged newer step is skipped with a
  // warning naming the file (core/checkpoint_resume.hpp). A checkpoint of another model,
  // optimizer, numbering or world size is refused, naming the key that differs. Collective.
  bool restore(WideTrainer& trainer, WideRunState& state);
  // Collective: every rank writes its shard, rank 0 commits after a barrier. Named by
  // state.global_step.
  void save(WideTrainer& trainer, const WideRunState& state);

 private:
  // Refuses `file` unless this run's identity wrote it, then loads it.
  void load(const TensorFile& file, const std::string& where, std::int64_t step, WideTrainer& trainer,
            WideRunState& state) const;
  comm::ProcessGroup& world_;
  RunIdentity identity_;
  std::unique_ptr<CheckpointDir> dir_;
  std::int64_t interval_ = 0;
  bool resume_ = false;
};

}  // namespace skew::wide
