// The FlexMoE policy: monitor -> trigger -> planner per layer -> change log. Plans are only
// considered once `warmup` iterations have been observed and then every planner.interval
// observations (the horizon the planner amortises a change over, so a change is never undone
// sooner), and run when a layer's predicted balance ratio exceeds the threshold. The trainer applies the returned
// placements with apply_placement.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/metrics.hpp"
#include "lib/placement/monitor.hpp"
#include "lib/placement/planner.hpp"
#include "lib/placement/policy.hpp"

namespace skew::placement {

struct FlexMoeOptions {
  double threshold = 1.2;  // plan when a layer's predicted max/mean rank load exceeds this
  int warmup = 5;          // observations before the first plan
  // Load monitor's exponential smoothing. 0.3 rather than 0.5: while routing churns a shorter
  // memory predicts the next step's counts better, and 0.3 beat 0.5 on four skewed moe_train
  // traces (results/moe/archive/bench_notes.md).
  double smoothing = 0.3;
  bool live_shares = true;  // the runtime re-levels replica shares every step on that step's counts
  PlannerOptions planner;
};

// Everything the FlexMoE policy takes from outside besides the model's sizes; the apps fill it
// from their [placement] settings.
struct PlacementOptions {
  // Cost-model constants to use instead of measuring at start-up: values <= 0 (the all-to-all
  // latency: < 0) are measured by measure_constants; gpus_per_node is always taken from here.
  CostConstants cost_overrides{.gemm_flops = 0,
                               .nvlink_bandwidth = 0,
                               .alltoall_bandwidth = 0,
                               .allreduce_bandwidth = 0,
                               .gpus_per_node = 8,
                               .alltoall_latency = -1};
  // Byte sizes of the expert's traffic and state; params and hidden_dim are the model's, set by
  // make_flexmoe_policy.
  ExpertShape shape;
  FlexMoeOptions flexmoe;
  int slots_per_rank = 0;  // expert slots per rank (memory budget); 0 = experts per rank + 1
};

// A change with the measured step time around it: `step_seconds_before` is the last step
// observed before the change, `step_seconds_after` the first one after (negative until seen).
struct LoggedChange {
  PlacementChange change;
  double step_seconds_before = -1, step_seconds_after = -1;
  Json to_json() const;
};

class FlexMoePolicy : public PlacementPolicy {
 public:
  FlexMoePolicy(CostModel model, int num_layers, int num_experts, FlexMoeOptions options);
  void observe(std::int64_t iteration, const RoutingCounts& counts, double step_seconds) override;
  std::vector<LayerPlacement> plan(std::int64_t iteration, const std::vector<LayerPlacement>& current) override;
  // flexmoe.monitor_estimate [L, E] f64, flexmoe.monitor_last [L, E] i64, flexmoe.counters
  // (observations, plans run) i64 and flexmoe.cost_constants f64, so a resumed run plans with
  // the constants measured at the original start-up. Measured step times only feed the change
  // log, not the plans, and are not kept.
  std::vector<std::pair<std::string, Tensor>> save_state() const override;
  void load_state(const TensorFile& file) override;

  // Changes whose step time after is known (call after observe), removed from the queue.
  std::vector<LoggedChange> take_changes();
  const CostModel& model() const { return model_; }
  const LoadMonitor& monitor() const { return monitor_; }
  const FlexMoeOptions& options() const { return options_; }
  std::int64_t plans_run() const { return plans_run_; }

 private:
  CostModel model_;
  LoadMonitor monitor_;
  FlexMoeOptions options_;
  double last_step_seconds_ = -1;
  std::int64_t plans_run_ = 0;
  std::vector<LoggedChange> waiting_, done_;
};

// The FlexMoE policy for `num_layers` MoE layers of `num_experts` experts of `expert_params`
// parameters on tokens of width `hidden_dim`: cost constants not given in `options` are
// measured over `world` (collective; every rank gets rank 0's values).
std::unique_ptr<FlexMoePolicy> make_flexmoe_policy(const PlacementOptions& options, comm::ProcessGroup& world,
                                                   int num_layers, int num_experts, std::int64_t expert_params,
                                                   int hidden_dim);

}  // namespace skew::placement
