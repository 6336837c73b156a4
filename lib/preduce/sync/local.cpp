// local SGD: every worker trains its own model and never synchronises; the final average model
// is the only combination (the lower bound on communication, and the upper bound on drift).
#include "lib/preduce/simulation.hpp"
#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {
namespace {

class Local : public SyncMode {
 public:
  using SyncMode::SyncMode;
  double local_step(Worker& me) const override {
    const double loss = me.gradient_at(me.params());
    me.apply_gradient();
    return loss;
  }
  std::unique_ptr<StepSync> start_segment(const SegmentContext& /*context*/) const override {
    return std::make_unique<InlineStep>(*this);
  }
  void step_done(sim::Simulation& sim, int w, double t) const override {
    local_step(sim.worker(w));
    sim.continue_or_finish(w, t);
  }
};

}  // namespace

std::unique_ptr<SyncMode> make_local(const TrainOptions& opt) {
  return std::make_unique<Local>(opt);
}

}  // namespace skew::preduce
