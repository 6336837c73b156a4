// all-reduce: every worker's gradient averaged over all workers after every step (synchronous
// data-parallel SGD), the baseline every other mode is measured against. A straggler holds back
// every round, so the run stops by train.steps only. The simulator runs it in lockstep rounds.
#include "core/error.hpp"
#include "core/timer.hpp"
#include "lib/preduce/simulation.hpp"
#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {
namespace {

class AllreduceStep : public InlineStep {
 public:
  AllreduceStep(const SyncMode& mode, std::shared_ptr<comm::ProcessGroup> workers)
      : InlineStep(mode), workers_(std::move(workers)) {}
  void synchronise(Worker& me, StepRecord& step) override {
    const Timer t;
    sleep_seconds(me.hetero().link_s());  // a slow link holds back the whole all-reduce
    workers_->allreduce(comm::view(me.grad()), comm::ReduceOp::Avg);
    step.comm = t.seconds();
    me.apply_gradient();
  }

 private:
  std::shared_ptr<comm::ProcessGroup> workers_;
};

class Allreduce : public SyncMode {
 public:
  using SyncMode::SyncMode;
  // Its rounds need every worker.
  bool time_limited() const override { return false; }
  // The gradient waits for the reduction.
  double local_step(Worker& me) const override { return me.gradient_at(me.params()); }
  std::unique_ptr<StepSync> start_segment(const SegmentContext& context) const override {
    return std::make_unique<AllreduceStep>(*this, context.workers);
  }
  void simulate_segment(sim::Simulation& sim) const override { sim.run_rounds(); }
  void step_done(sim::Simulation& /*sim*/, int /*w*/, double /*t*/) const override {
    SKEW_THROW("all-reduce is simulated in rounds");
  }
};

}  // namespace

std::unique_ptr<SyncMode> make_allreduce(const TrainOptions& opt) {
  return std::make_unique<Allreduce>(opt);
}

}  // namespace skew::preduce
