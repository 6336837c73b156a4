#include "lib/preduce/sync/sync_mode.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "lib/preduce/simulation.hpp"

namespace skew::preduce {

std::unique_ptr<SyncMode> make_sync_mode(const TrainOptions& opt) {
  if (opt.mode == "allreduce") return make_allreduce(opt);
  if (opt.mode == "preduce") return make_preduce(opt);
  if (opt.mode == "adpsgd") return make_adpsgd(opt);
  if (opt.mode == "eager") return make_eager(opt);
  if (opt.mode == "local") return make_local(opt);
  SKEW_THROW("sync.mode: unknown mode '" << opt.mode << "' (allreduce, preduce, adpsgd, eager, local)");
}

// Partial reduce's options; the simulator keeps a former (and checkpoints its state) in every mode.
comm::GroupOptions SyncMode::group_options(int num_workers) const {
  comm::GroupOptions g;
  g.num_workers = num_workers;
  g.group_size = opt_.group_size;
  g.alpha = opt_.alpha;
  g.member_rule = opt_.member_rule;
  // The reference's bound counts worker updates (b * N); a group carries about P of them.
  g.isolation_bound =
      opt_.isolation_bound > 0 ? std::max(1, opt_.isolation_bound * num_workers / std::max(1, opt_.group_size)) : 0;
  g.isolation_rule = opt_.isolation_rule;
  g.deadline_s = opt_.preduce_deadline_ms * 1e-3;
  g.min_group = 2;
  return g;
}

void SyncMode::simulate_segment(sim::Simulation& sim) const {
  sim.run_events();
}

void SyncMode::group_closed(sim::Simulation& /*sim*/, const comm::Group& /*g*/, double /*t*/, double /*done*/) const {
  SKEW_THROW("sync.mode = " << opt_.mode << " forms no partial-reduce groups");
}

void SyncMode::comm_thread_free(sim::Simulation& /*sim*/, int /*w*/, double /*t*/) const {
  SKEW_THROW("sync.mode = " << opt_.mode << " has no communication thread");
}

}  // namespace skew::preduce
