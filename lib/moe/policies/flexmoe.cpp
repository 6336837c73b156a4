#include "lib/moe/policies/flexmoe.hpp"

#include <cmath>

#include "core/timer.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/placement/planner.hpp"
#include "lib/placement/policy.hpp"

namespace skew::moe {

template <class T>
FlexMoePolicy<T>::FlexMoePolicy(std::unique_ptr<placement::FlexMoePolicy> planner, int slots_per_rank,
                                comm::ProcessGroup& world)
    : planner_(std::move(planner)), slots_(slots_per_rank), world_(world) {}

// Live shares: the planner fixed where replicas live; this step's own counts decide how the
// tokens are split among them (every rank computes the same shares from the same counts).
template <class T>
placement::LayerPlacement FlexMoePolicy<T>::replica_shares(const LayerView<T>& layer,
                                                           const std::vector<std::int64_t>& all_counts) const {
  placement::LayerPlacement shares = layer.placement();
  if (!planner_->options().live_shares) return shares;
  const int E = shares.num_experts(), N = layer.world().size();
  std::vector<double> global(static_cast<std::size_t>(E), 0.0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e)
      global[static_cast<std::size_t>(e)] += static_cast<double>(all_counts[static_cast<std::size_t>(r) * E + e]);
  placement::assign_shares(shares, global, true);
  return shares;
}

template <class T>
void FlexMoePolicy<T>::replan(std::int64_t iteration, Layers& layers, placement::ExpertStateStore& store) {
  change_ = nullptr;
  std::vector<placement::LayerPlacement> current;
  for (auto& layer : layers) current.push_back(layer->placement());
  const auto next = planner_->plan(iteration, current);
  if (next == current) return;
  Timer move;
  const std::vector<double> sent = placement::apply_placement(world_, store, current, next);
  for (std::size_t l = 0; l < next.size(); ++l) {
    layers[l]->set_placement(next[l]);
    // New replicas received their weights after the store created them: round bf16 copies again.
    layers[l]->weights_changed();
    layers[l]->times().move_bytes += sent[l];
  }
  change_ = {{"seconds", move.seconds()}, {"placement", Json::array()}};
  for (const auto& p : next) change_["placement"].push_back(p.to_string());
  ++changes_;
}

template <class T>
void FlexMoePolicy<T>::observe(std::int64_t iteration, const Layers& layers, double step_seconds) {
  placement::RoutingCounts counts;
  for (const auto& layer : layers) counts.push_back(layer->gate_state().global_counts);
  // How far the load the plan was made for lay from this step's load: sum over experts of
  // |estimate - count| / tokens, per layer (2 = every token elsewhere than predicted).
  prediction_error_ = Json::array();
  const placement::LoadMonitor& monitor = planner_->monitor();
  for (std::size_t l = 0; l < counts.size() && !monitor.empty(); ++l) {
    double off = 0, tokens = 0;
    for (std::size_t e = 0; e < counts[l].size(); ++e) {
      off += std::abs(monitor.estimate(static_cast<int>(l))[e] - static_cast<double>(counts[l][e]));
      tokens += static_cast<double>(counts[l][e]);
    }
    prediction_error_.push_back(tokens > 0 ? off / tokens : 0.0);
  }
  // Every rank must observe the same numbers: the slowest rank's step time.
  std::vector<double> slowest = {step_seconds};
  world_.allreduce(comm::view(slowest), comm::ReduceOp::Max);
  planner_->observe(iteration, counts, slowest[0]);
}

template <class T>
void FlexMoePolicy<T>::record(const Layers& /*layers*/, Json& record) const {
  if (!prediction_error_.empty()) record["prediction_error"] = prediction_error_;
  if (!change_.is_null()) record["placement_change"] = change_;
}

template <class T>
void FlexMoePolicy<T>::summarise(Json& summary) const {
  summary["placement_changes"] = changes_;
  summary["cost_constants"] = placement::cost_constants_summary(planner_->model().constants());
}

template <class T>
std::shared_ptr<FlexMoePolicy<T>> make_flexmoe(const placement::PlacementOptions& placement, int slots_per_rank,
                                               comm::ProcessGroup& world, int layers, const MoeOptions& options) {
  return std::make_shared<FlexMoePolicy<T>>(
      placement::make_flexmoe_policy(placement, world, layers, options.gate.num_experts, options.expert_params(),
                                     options.d_model),
      slots_per_rank, world);
}

template class FlexMoePolicy<float>;
template class FlexMoePolicy<double>;
template std::shared_ptr<FlexMoePolicy<float>> make_flexmoe<float>(const placement::PlacementOptions&, int,
                                                                   comm::ProcessGroup&, int, const MoeOptions&);
template std::shared_ptr<FlexMoePolicy<double>> make_flexmoe<double>(const placement::PlacementOptions&, int,
                                                                     comm::ProcessGroup&, int, const MoeOptions&);

}  // namespace skew::moe
