// Trace-driven cluster simulator: replays routing counts through the cost model and reports
// each policy's step time (expert part of a step: compute, all-to-all, replica/shadow sync), every
// policy and the ideal under the same exchange schedule (SimSetup::schedule: all-to-all after
// compute, or pipelined with it in stages, each stage paying its latency).
//   static      one replica per expert, block placement, dropless, no padding
//   deepspeed   DeepSpeed-MoE: every expert padded to a capacity; capacity_factor 0 = dropless
//               (pad to the max count, drop_tokens=false), > 0 = ceil(assignments / E x cf) and
//               tokens beyond it dropped
//   fastermoe   FasterMoE shadowing: the hottest experts are broadcast to every rank and computed
//               where their tokens are, chosen greedily while the predicted time falls (the
//               decision of moe_train's fastermoe policy, shadowing.hpp); broadcast and gradient
//               reduce paid every step
//   flexmoe     FlexMoePolicy: replicas planned between iterations, change cost charged
//   ideal       a lower bound on every dropless policy above (ideal_step)
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/progress.hpp"
#include "lib/placement/flexmoe.hpp"
#include "lib/placement/plan_log.hpp"
#include "lib/placement/trace.hpp"

namespace skew::placement {

struct SimSetup {
  CostConstants constants;
  ExpertShape shape;
  int gpus = 8;
  int slots_per_rank = 0;             // 0 = experts per rank + 1
  double capacity_factor = 0.0;       // deepspeed: 0 = dropless padding to the max count
  std::int64_t min_capacity = 4;      // deepspeed: least slots per expert and rank (moe.min_capacity)
  ExchangeSchedule schedule;          // how every policy's all-to-all meets its compute
  JsonlWriter* change_log = nullptr;  // receives flexmoe's placement changes when set
  Progress* progress = nullptr;       // told each iteration replayed, when set
  PlanStats* plan_stats = nullptr;    // receives flexmoe's plans, predicted vs realised, when set
  FutureSampler plan_futures;         // with plan_stats: each plan also scored on these futures
  FlexMoeOptions flexmoe;
  // Constants every policy's step is scored with (calibrated from measured runs,
  // calibration.hpp); unset = `constants`, the model the planners decide with. Scoring with the
  // planners' own model lets them win by construction.
  std::optional<CostConstants> scoring;
};

struct PolicySeries {
  std::string policy;
  std::vector<double> step_seconds;  // per iteration, summed over layers
  std::vector<double> balance;       // per iteration, mean over layers of max/mean rank load
  double dropped_fraction = 0;       // of all assignments (deepspeed with a capacity factor)
  std::int64_t changes = 0;          // flexmoe: placement steps taken; fastermoe: shadowed experts
  double mean_step() const;
};

// Single-layer step times of the baselines under the uniform-source all-to-all model and the
// model's exchange schedule.
double static_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus);
// With a capacity factor each expert takes gpus x moe_train's per-rank capacity
// (deepspeed_capacity.hpp), at least `min_capacity` per rank, and drops the rest.
double deepspeed_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus, double capacity_factor,
                      std::int64_t min_capacity, std::int64_t* dropped);
// The shadows are chosen with `decide` (the policy's model) and the step is scored with `score`,
// each under its own schedule. `shadows` receives how many experts were shadowed, `balance` the
// resulting max/mean rank load.
double fastermoe_step(const CostModel& decide, const CostModel& score, const std::vector<std::int64_t>& counts,
                      int gpus, int* shadows, double* balance = nullptr);
// A lower bound on every dropless policy's step under the model and its schedule: the work
// spread evenly (total / gpus each) and the least exchange any placement needs. Each expert's
// tokens either cross to where it is computed or its parameters go to where the tokens are; the
// cheaper of the two per expert, on the link that carries it, spread evenly over the ranks'
// links (each rank's sends are at least the mean); one latency per round and stage. That exchange
// may hide under compute (pipelined) or not, wherever a policy would put it: the bound takes the
// most favourable split. Deepspeed with a capacity factor drops tokens and may go below it.
double ideal_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus);

// All policies over the trace, in the order static, deepspeed, fastermoe, flexmoe, ideal.
std::vector<PolicySeries> simulate(const RoutingTrace& trace, const SimSetup& setup);

}  // namespace skew::placement
