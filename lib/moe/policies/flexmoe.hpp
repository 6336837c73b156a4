// FlexMoE (Nie et al., SIGMOD 2023): dynamic expert management. Routing is never changed;
// instead experts get replicas in spare "vExpert" slots, each replica computing a share of its
// expert's tokens and the replicas' gradients all-reduced among them (as in StaticPolicy), and
// between iterations the placement machinery of lib/placement re-places replicas: a monitor of
// the per-expert load, a trigger (balance ratio over a threshold, or an interval), a greedy
// planner on a cost model, and an executor moving expert state.
//
// Shares: the paper splits an expert's tokens evenly among its replicas; the planner here can
// also level them by predicted rank load ("balanced"), and our "live" variant re-levels them
// every step from that step's global counts (placement.shares). Planner moves: the paper's
// (placement.flexmoe_variant = paper, the default) or those plus our hedge move (= hedge).
#pragma once
#include <memory>

#include "lib/moe/policies/static.hpp"
#include "lib/placement/flexmoe.hpp"

namespace skew::moe {

template <class T>
class FlexMoePolicy : public StaticPolicy<T> {
 public:
  using Layers = typename BalancingPolicy<T>::Layers;
  // `slots_per_rank`: resolved (> 0). `world`: the group the experts are placed over.
  FlexMoePolicy(std::unique_ptr<placement::FlexMoePolicy> planner, int slots_per_rank, comm::ProcessGroup& world);
  placement::LayerPlacement replica_shares(const LayerView<T>& layer,
                                           const std::vector<std::int64_t>& all_counts) const override;
  int slots_per_rank(int, int) const override { return slots_; }
  // Applies the planner's placements when they change (the move's time is part of the step).
  void replan(std::int64_t iteration, Layers& layers, placement::ExpertStateStore& store) override;
  // Feeds the planner every layer's global counts and the slowest rank's step time.
  void observe(std::int64_t iteration, const Layers& layers, double step_seconds) override;
  // "prediction_error" per layer and, in an iteration that re-placed experts, "placement_change".
  void record(const Layers& layers, Json& record) const override;
  // "placement_changes" and the cost model's measured "cost_constants".
  void summarise(Json& summary) const override;
  std::vector<std::pair<std::string, Tensor>> save_state() const override { return planner_->save_state(); }
  void load_state(const TensorFile& file) override { planner_->load_state(file); }

 private:
  std::unique_ptr<placement::FlexMoePolicy> planner_;
  int slots_;
  comm::ProcessGroup& world_;
  Json change_, prediction_error_;  // of the current iteration
  std::int64_t changes_ = 0;
};

// The FlexMoE policy for `layers` MoE layers of `options` (experts, their size) over `world`:
// the planner from `placement` (cost constants it does not give are measured, collectively).
template <class T>
std::shared_ptr<FlexMoePolicy<T>> make_flexmoe(const placement::PlacementOptions& placement, int slots_per_rank,
                                               comm::ProcessGroup& world, int layers, const MoeOptions& options);

}  // namespace skew::moe
