// eager-SGD (Li et al., partial collectives): every worker is invited to each round, a round
// closes eager.deadline_ms after its first arrival with whoever made it (at least one worker, or
// half of them with eager.quorum = majority), and its members average their accumulated
// gradients with equal weights; late workers keep accumulating and join the next round. Every
// eager.sync_every-th round waits for everyone and also averages the models.
#include "lib/preduce/simulation.hpp"
#include "lib/preduce/sync/group_step.hpp"
#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {
namespace {

class EagerStep : public GroupStep {
 public:
  using GroupStep::GroupStep;

 private:
  void reduce(Worker& me, const comm::Group& g) override {
    pr_.average_gradient(me.accum(), g);
    me.apply_accumulated();
    if (g.full_sync) pr_.average_model(me.params(), g, scratch_);
    me.set_version(g.max_version + 1);
  }
};

class Eager : public SyncMode {
 public:
  using SyncMode::SyncMode;
  bool forms_groups() const override { return true; }
  // Everyone is invited to each round; the deadline decides who makes it. Equal weights.
  comm::GroupOptions group_options(int num_workers) const override {
    comm::GroupOptions g;
    g.num_workers = num_workers;
    g.group_size = num_workers;
    g.alpha = 1.0;
    g.deadline_s = opt_.eager_deadline_ms * 1e-3;
    g.min_group = opt_.eager_majority ? (num_workers + 1) / 2 : 1;
    g.full_sync_every = opt_.eager_sync_every;
    return g;
  }
  double local_step(Worker& me) const override {
    const double loss = me.gradient_at(me.params());
    me.accumulate_gradient();
    return loss;
  }
  std::unique_ptr<StepSync> start_segment(const SegmentContext& context) const override {
    return std::make_unique<EagerStep>(*this, *context.pr, context.progress);
  }
  void step_done(sim::Simulation& sim, int w, double t) const override {
    local_step(sim.worker(w));
    sim.join_group(w, t);
  }
  void group_closed(sim::Simulation& sim, const comm::Group& g, double t, double done) const override {
    sim.charge_group_wait(g, t);
    sim.average_gradients(g, &Worker::accum);
    for (int m : g.members) sim.worker(m).apply_accumulated();
    if (g.full_sync) sim.average_models(g);
    sim.release_group(g, done, 1);
  }
};

}  // namespace

std::unique_ptr<SyncMode> make_eager(const TrainOptions& opt) {
  return std::make_unique<Eager>(opt);
}

}  // namespace skew::preduce
