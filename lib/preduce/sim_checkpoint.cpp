// The simulator's checkpoint: one shard (world size 1) with every virtual worker's tensors and
// the simulation's own state.
#include "core/error.hpp"
#include "lib/preduce/simulation.hpp"

namespace skew::preduce::sim {

// The simulator's one shard: every worker's tensors (its wait as sum_wait, its end time as
// elapsed_s), the run's counters and clock, the AD-PSGD partner streams, the controller.
TensorList Simulation::save_state() {
  TensorList out;
  for (int w = 0; w < n_; ++w) {
    const auto i = static_cast<std::size_t>(w);
    WorkerProgress p;
    p.sum_wait = wait_[i];
    p.elapsed_s = end_[i];
    p.synced.refreshes = refreshes_[i];
    const auto e = std::find(eval_ids_.begin(), eval_ids_.end(), w);
    if (e != eval_ids_.end()) p.series = series_[static_cast<std::size_t>(e - eval_ids_.begin())];
    append_worker(out, workers_[i], p);
  }
  std::vector<double> state{static_cast<double>(groups_), static_cast<double>(members_), next_eval_, start_};
  state.insert(state.end(), gossip_free_at_.begin(), gossip_free_at_.end());
  out.emplace_back("sim.state", Tensor::from_vector(state, {static_cast<std::int64_t>(state.size())}));
  std::vector<std::int64_t> offsets;
  for (const Rng& r : gossip_rng_) offsets.push_back(static_cast<std::int64_t>(r.offset()));
  out.emplace_back("sim.gossip_offsets", Tensor::from_vector(offsets, {n_}));
  append_controller(out, former_.state());
  return out;
}

void Simulation::load_state(const TensorFile& file, const std::string& origin) {
  for (int w = 0; w < n_; ++w) {
    const auto i = static_cast<std::size_t>(w);
    WorkerProgress p;
    load_worker(file, origin, workers_[i], p);
    wait_[i] = p.sum_wait;
    end_[i] = p.elapsed_s;
    refreshes_[i] = p.synced.refreshes;
    const auto e = std::find(eval_ids_.begin(), eval_ids_.end(), w);
    if (e != eval_ids_.end()) series_[static_cast<std::size_t>(e - eval_ids_.begin())] = p.series;
  }
  const Tensor& state = file.get("sim.state");
  const Tensor& offsets = file.get("sim.gossip_offsets");
  SKEW_CHECK(state.numel() == 4 + static_cast<std::size_t>(n_) && offsets.numel() == static_cast<std::size_t>(n_),
             origin << ": sim.state / sim.gossip_offsets are not of " << n_ << " workers");
  const double* v = state.data<double>();
  groups_ = static_cast<std::int64_t>(v[0]);
  members_ = static_cast<std::int64_t>(v[1]);
  next_eval_ = v[2];
  start_ = v[3];
  gossip_free_at_.assign(v + 4, v + 4 + n_);
  for (int w = 0; w < n_; ++w)
    gossip_rng_[static_cast<std::size_t>(w)] = Rng(opt_.seed, 0xad95d000ull + static_cast<std::uint64_t>(w),
                                                   static_cast<std::uint64_t>(offsets.data<std::int64_t>()[w]));
  former_ = comm::GroupFormer(mode_->group_options(n_));
  former_.restore(load_controller(file));
}

}  // namespace skew::preduce::sim
