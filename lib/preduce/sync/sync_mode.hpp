// A synchronisation mode: how preduce_train's data-parallel workers combine their updates. The
// worker's local step, the MPI trainer (trainer.cpp) and the simulator (simulator.cpp) call the
// mode at fixed points and never ask which mode they hold. One scheme per file, in
// lib/preduce/sync/:
//   allreduce.cpp  synchronous gradient average over every worker each step (the baseline)
//   preduce.cpp    partial reduce (P-Reduce): any P ready workers average with staleness-aware
//                  weights; its variants preduce.reduce = gradient and preduce.overlap
//   adpsgd.cpp     AD-PSGD: asynchronous pairwise averaging of active with passive workers
//   eager.cpp      eager-SGD: a partial collective that closes at a deadline
//   local.cpp      local SGD: no synchronisation at all
// Pieces two modes share: group_step.hpp (a blocking group through the partial-reduce
// controller: preduce, eager) and ../background.hpp (a communication thread: adpsgd, overlapped
// preduce). make_sync_mode (sync_mode.cpp) is the one place that turns sync.mode's name into
// its object.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "lib/preduce/options.hpp"
#include "lib/preduce/worker.hpp"
#include "mpi/preduce_controller.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

struct WorkerProgress;
namespace sim {
class Simulation;
}

// One step of an MPI worker: its loss and where its time went.
struct StepRecord {
  double loss = 0.0, compute = 0.0, injected = 0.0;
  double wait = 0.0;        // for peers or a group (the computing thread's)
  double comm = 0.0;        // exchanging models or gradients
  double controller = 0.0;  // of the wait, controller and message latency
  std::vector<int> members;
};

// An MPI worker's synchronisation over one segment of training (the steps between checkpoints).
class StepSync {
 public:
  virtual ~StepSync() = default;
  // This step's gradient and the mode's local update; returns the minibatch loss.
  virtual double compute(Worker& me) = 0;
  // After the compute and the injected delay: synchronise, recording the time it took.
  virtual void synchronise(Worker& me, StepRecord& step) = 0;
  // Guards the model and version against a communication thread (an empty lock without one).
  virtual std::unique_lock<std::mutex> lock() { return {}; }
  // The segment's end: completes what is in flight and adds its totals to `progress`.
  virtual void finish(WorkerProgress& /*progress*/) {}
};

// What an MPI segment's synchronisation works with.
struct SegmentContext {
  std::shared_ptr<comm::ProcessGroup> workers;
  comm::PartialReduce* pr = nullptr;  // the segment's controller client when the mode forms groups
  Worker& me;
  WorkerProgress& progress;
};

class SyncMode {
 public:
  // `opt` must outlive the mode; the mode reads it as it is when called (the MPI run resolves
  // preduce.group_size = 0 into it after the warm-up).
  explicit SyncMode(const TrainOptions& opt) : opt_(opt) {}
  virtual ~SyncMode() = default;

  // Properties the drivers plan and report by.
  // Whether workers stop independently at train.max_seconds.
  virtual bool time_limited() const { return opt_.max_seconds > 0.0; }
  // Whether groups form through the partial-reduce controller (comm::PartialReduce).
  virtual bool forms_groups() const { return false; }
  // Whether a communication thread synchronises, so a worker's sync totals are that thread's.
  virtual bool in_background() const { return false; }
  // Whether workers rejoin a group without a new local step (preduce.refresh_staleness).
  virtual bool counts_refreshes() const { return false; }
  // Whether the group size is chosen from a warm-up window (auto_group.hpp).
  virtual bool auto_group_size() const { return false; }
  // The group former's options for `num_workers` workers.
  virtual comm::GroupOptions group_options(int num_workers) const;

  // The worker's step: the gradient of its minibatch, then the mode's rule before synchronising
  // (apply it, accumulate it, or leave it for the reduction). Returns the minibatch loss.
  virtual double local_step(Worker& me) const = 0;

  // The MPI run. Refuses, before any data is loaded, what the mode cannot do there.
  virtual void check_mpi_run() const {}
  virtual std::unique_ptr<StepSync> start_segment(const SegmentContext& context) const = 0;

  // The simulator. One segment on the virtual clock (events by default).
  virtual void simulate_segment(sim::Simulation& sim) const;
  // Worker `w`'s step is done at virtual time `t`.
  virtual void step_done(sim::Simulation& sim, int w, double t) const = 0;
  // Group `g` closed at `t`; its communication completes at `done`.
  virtual void group_closed(sim::Simulation& sim, const comm::Group& g, double t, double done) const;
  // Worker `w`'s communication thread is free again at `t` (modes with one).
  virtual void comm_thread_free(sim::Simulation& sim, int w, double t) const;

 protected:
  const TrainOptions& opt_;
};

// The mode sync.mode (opt.mode) names, reading `opt` (which must outlive it).
std::unique_ptr<SyncMode> make_sync_mode(const TrainOptions& opt);
// Each in its own file.
std::unique_ptr<SyncMode> make_allreduce(const TrainOptions& opt);
std::unique_ptr<SyncMode> make_preduce(const TrainOptions& opt);
std::unique_ptr<SyncMode> make_adpsgd(const TrainOptions& opt);
std::unique_ptr<SyncMode> make_eager(const TrainOptions& opt);
std::unique_ptr<SyncMode> make_local(const TrainOptions& opt);

// A step whose update the computing thread makes by the mode's rule, with no communication
// thread: local SGD's as it is (no synchronisation), all-reduce's with its reduction added.
class InlineStep : public StepSync {
 public:
  explicit InlineStep(const SyncMode& mode) : mode_(mode) {}
  double compute(Worker& me) override { return mode_.local_step(me); }
  void synchronise(Worker& /*me*/, StepRecord& /*step*/) override {}

 private:
  const SyncMode& mode_;
};

}  // namespace skew::preduce
