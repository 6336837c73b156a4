// AD-PSGD (Lian et al., asynchronous decentralized parallel SGD): every worker applies its own
// gradient at once; beside it a communication thread averages the model pairwise. Even workers
// are active (after each local step they ask for one averaging with a random odd, passive
// worker), odd ones passive (they answer). The computing thread never waits for a peer. On MPI
// ranks the gossip thread is comm::PairwiseGossip (mpi/preduce_gossip.hpp).
#include "core/error.hpp"
#include "lib/preduce/background.hpp"
#include "lib/preduce/simulation.hpp"
#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {
namespace {

class Adpsgd : public SyncMode {
 public:
  using SyncMode::SyncMode;
  bool in_background() const override { return true; }
  double local_step(Worker& me) const override {
    const double loss = me.gradient_at(me.params());
    me.apply_gradient();
    return loss;
  }
  void check_mpi_run() const override {
    bool slow_link = false;
    for (double ms : opt_.hetero.link_ms) slow_link = slow_link || ms > 0.0;
    SKEW_CHECK(!slow_link,
               "hetero.link_ms: not injected into MPI runs of sync.mode = adpsgd (its gossip thread is in mpi/); "
               "use --simulate for slow links with AD-PSGD");
  }
  std::unique_ptr<StepSync> start_segment(const SegmentContext& context) const override {
    return gossip_step(context, opt_.seed);
  }
  void step_done(sim::Simulation& sim, int w, double t) const override {
    local_step(sim.worker(w));
    if (w % 2 == 0) sim.gossip_when_free(w, t);
    sim.continue_or_finish(w, t);
  }
  void comm_thread_free(sim::Simulation& sim, int w, double t) const override { sim.gossip(w, t); }
};

}  // namespace

std::unique_ptr<SyncMode> make_adpsgd(const TrainOptions& opt) {
  return std::make_unique<Adpsgd>(opt);
}

}  // namespace skew::preduce
