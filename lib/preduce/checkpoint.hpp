// preduce_train's checkpoints (output.checkpoint_dir, core's CheckpointDir): every rank
// writes its shard, a barrier, then rank 0 writes the index and the complete-marker.
//   a worker's shard:      w<id>.params, w<id>.accum (eager's unapplied gradient sum),
//                          w<id>.counters (step, version, groups and sync counts),
//                          w<id>.totals (time sums, elapsed time, next evaluation time),
//                          w<id>.series (its test accuracy on the time grid so far);
//   world rank 0's shard:  controller.counters and controller.parent (comm::FormerState), when
//                          the mode has a partial-reduce controller;
//   the simulator:         one shard (world size 1) with every virtual worker's tensors and its
//                          own state (simulator.cpp).
// The index records what the checkpoint belongs to (run_identity); a resume with another
// mode, worker count or model is refused naming the key that differs. Data order and injected
// delays are functions of the step, so the step restores them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/checkpoint.hpp"
#include "lib/preduce/options.hpp"
#include "lib/preduce/progress.hpp"
#include "lib/preduce/worker.hpp"
#include "mpi/preduce_groups.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

using TensorList = std::vector<std::pair<std::string, Tensor>>;

// Worker `id`'s tensors (w<id>.*) appended to `out`, and read back; load_worker throws naming
// the tensor whose size does not match this run's model.
void append_worker(TensorList& out, Worker& worker, const WorkerProgress& progress);
void load_worker(const TensorFile& file, const std::string& origin, Worker& worker, WorkerProgress& progress);
void append_controller(TensorList& out, const comm::FormerState& state);
comm::FormerState load_controller(const TensorFile& file);

// The keys a checkpoint must agree on with the run resuming it.
Json run_identity(const TrainOptions& opt, int workers);

class RunCheckpoints {
 public:
  // Disabled (enabled() false) when output.checkpoint_dir is empty.
  RunCheckpoints(const TrainOptions& opt, int world_rank, int world_size, int workers);
  bool enabled() const { return dir_ != nullptr; }
  // Where the segments of a run whose slowest worker starts at `first` end: the checkpoint
  // steps after it (output.checkpoint_interval), then train.steps.
  std::vector<std::int64_t> segment_ends(std::int64_t first) const;
  // Collective over `world`: writes `tensors` as this rank's shard of `step`, then (rank 0)
  // the index and the marker; returns once the step is complete for every rank. No world: the
  // one process of the simulator.
  void save(comm::ProcessGroup* world, std::int64_t step, const TensorList& tensors) const;
  // This rank's shard of the step resumed from, and its file's name.
  using ShardLoader = std::function<void(const TensorFile& shard, const std::string& origin)>;
  // With output.resume: hands `load` this rank's shard of the newest complete step that verifies
  // on every rank (`agree`: and-ed over the ranks; a damaged newer step is skipped with a
  // warning naming the file, core/checkpoint_resume.hpp) and returns its step; -1 when there is
  // nothing to resume from. A checkpoint of another mode, worker count or model is refused.
  std::int64_t restore(const std::function<bool(bool)>& agree, const ShardLoader& load) const;

 private:
  // Refuses a step whose index records another run identity, naming the key.
  void check_identity(std::int64_t step, const Json& index) const;
  const TrainOptions* opt_;
  Json identity_;
  std::unique_ptr<CheckpointDir> dir_;
};

}  // namespace skew::preduce
