// Partial reduce (P-Reduce, Miao et al.): after each local step a worker reports ready to the
// controller, and any P = preduce.group_size ready workers form a group that averages its
// models with staleness-aware weights (comm::GroupFormer: weights, member rule, isolation
// bound, deadline), so no worker waits for a straggler outside its group. Variants:
//   preduce.reduce = gradient  the group averages gradients, applied after the reduction;
//   preduce.overlap            the averaging runs on a communication thread beside the next
//                              local steps (../background.hpp), with preduce.refresh_staleness;
//   preduce.group_size = 0     P chosen from a warm-up window (../auto_group.hpp).
#include "lib/preduce/sync/preduce.hpp"

#include "core/error.hpp"
#include "lib/preduce/background.hpp"
#include "lib/preduce/simulation.hpp"
#include "lib/preduce/sync/group_step.hpp"
#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {

std::int64_t refresh_budget(const TrainOptions& opt, std::int64_t max_version, std::int64_t ready_version) {
  const std::int64_t staleness = max_version - ready_version + 1;
  return opt.overlap && opt.refresh_staleness > 0 && staleness >= opt.refresh_staleness ? staleness - 1 : 0;
}

namespace {

class PreduceStep : public GroupStep {
 public:
  PreduceStep(const SyncMode& mode, comm::PartialReduce& pr, WorkerProgress& progress, bool gradients)
      : GroupStep(mode, pr, progress), gradients_(gradients) {}

 private:
  void reduce(Worker& me, const comm::Group& g) override {
    if (gradients_) {
      pr_.average_gradient(me.grad(), g);
      me.apply_gradient();
      me.set_version(g.max_version + 1);
    } else {
      pr_.average_model(me.params(), g, scratch_);
      me.set_version(g.max_version);
    }
  }
  bool gradients_;
};

class Preduce : public SyncMode {
 public:
  using SyncMode::SyncMode;
  bool forms_groups() const override { return true; }
  bool in_background() const override { return opt_.overlap; }
  bool counts_refreshes() const override { return opt_.overlap; }
  bool auto_group_size() const override { return opt_.group_size == 0; }
  comm::GroupOptions group_options(int num_workers) const override {
    // A lone worker (a single-rank run) has no one to group with and trains alone, as before.
    if (num_workers > 1 && opt_.group_size > num_workers)
      SKEW_THROW("preduce.group_size " << opt_.group_size << " is more than the " << num_workers
                                       << " workers (sim.workers with --simulate, else the MPI ranks less a "
                                          "dedicated controller)");
    SKEW_CHECK(opt_.group_size >= 2, "preduce.group_size = 0 (auto) reached the group former unresolved");
    return SyncMode::group_options(num_workers);
  }
  // Models: the step is applied before they are averaged; gradients wait for the reduction.
  double local_step(Worker& me) const override {
    const double loss = me.gradient_at(me.params());
    if (!opt_.reduce_gradient) me.apply_gradient();
    return loss;
  }
  std::unique_ptr<StepSync> start_segment(const SegmentContext& context) const override {
    if (opt_.overlap) return overlapped_reduce_step(context, opt_);
    return std::make_unique<PreduceStep>(*this, *context.pr, context.progress, opt_.reduce_gradient);
  }
  void step_done(sim::Simulation& sim, int w, double t) const override {
    local_step(sim.worker(w));
    if (!opt_.overlap) return sim.join_group(w, t);
    // The request first: a worker whose last step this was then finishes once it is reduced.
    sim.reduce_when_free(w, t);
    sim.continue_or_finish(w, t);
  }
  void group_closed(sim::Simulation& sim, const comm::Group& g, double t, double done) const override {
    if (opt_.overlap) {  // the computing threads do not wait
      sim.average_models(g);
      sim.reduce_in_background(g, done, [this](std::int64_t max_version, std::int64_t ready_version) {
        return refresh_budget(opt_, max_version, ready_version);
      });
      return;
    }
    sim.charge_group_wait(g, t);
    if (opt_.reduce_gradient) {
      sim.average_gradients(g, &Worker::grad);
      for (int m : g.members) sim.worker(m).apply_gradient();
    } else {
      sim.average_models(g);
    }
    sim.release_group(g, done, opt_.reduce_gradient ? 1 : 0);
  }
  void comm_thread_free(sim::Simulation& sim, int w, double t) const override { sim.reduced(w, t); }
};

}  // namespace

std::unique_ptr<SyncMode> make_preduce(const TrainOptions& opt) {
  return std::make_unique<Preduce>(opt);
}

}  // namespace skew::preduce
