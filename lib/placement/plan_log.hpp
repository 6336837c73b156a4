// What flexmoe's plans were worth in a simulation, as a counterfactual: the iterations that
// followed a plan, until the next plan (or the trace's end), scored under the placement before it
// and under the one after (both with the runtime's shares on each iteration's counts, the same
// model and exchange schedule), less the plan's moves as paid. Its prediction is the same sum
// with the load estimate the plan was made with standing in for each iteration's counts, and the
// moves as the planner costed them: with one model for both, the only error left is the
// estimate's. Also how long the replicas it created lived.
#pragma once
#include <cstdint>
#include <vector>

#include "core/metrics.hpp"
#include "lib/placement/cost_model.hpp"
#include "lib/placement/policy.hpp"
#include "lib/placement/trace.hpp"

namespace skew::placement {

// The per-plan tolerance of issue 35: a plan's realised net gain within 25% of its prediction.
inline constexpr double kPlanTolerance = 0.25;

// The largest share of `values` one prediction x != 0 has within `tolerance` of itself
// (|v / x - 1| <= tolerance): what the best constant prediction scores on them. 0 when empty.
double best_share_within(std::vector<double> values, double tolerance);

struct PlanRecord {
  std::int64_t iteration = 0;
  int added = 0, removed = 0;           // replicas, over all layers
  double change_seconds = 0;            // the plan's state moves as paid (scoring model), all layers
  double predicted_change_seconds = 0;  // the same moves as the planner's model costs them
  double predicted_gain = 0;            // seconds per iteration, summed over layers
  double realised_gain = 0;             // mean seconds per iteration over `realised_iterations`
  std::int64_t realised_iterations = 0;
  // Scored on other futures of a generated trace (PlanTracker::sample_futures; 0 = none): the share
  // whose realised net gain is within kPlanTolerance of the prediction, and best_share_within of
  // them, what any prediction made at the plan, however good, could have scored.
  std::int64_t futures = 0;
  double futures_within = 0, best_within = 0;
  // Seconds the plan saved over its `realised_iterations`, net of its moves.
  double predicted_net() const;
  double realised_net() const;
  Json to_json() const;
};

struct PlanStats {
  std::vector<PlanRecord> plans;
  std::vector<std::int64_t> lifetimes;  // iterations each removed replica lived
  std::int64_t alive_at_end = 0;        // replicas created by plans and never removed
  std::int64_t iterations = 0;
  // Replicas added or removed per 100 iterations.
  double changes_per_100() const;
  // Median of `lifetimes` (-1 when no replica was removed).
  double median_lifetime() const;
};

class PlanTracker {
 public:
  // `planner`: the model flexmoe planned with (predicted gains); `scorer`: the one the simulated
  // steps are scored with (realised gains); `live_shares`: shares re-levelled on each load.
  PlanTracker(const CostModel& planner, const CostModel& scorer, bool live_shares, PlanStats& stats);
  // Flexmoe's plan at `iteration` took `before` to `after`, planning on `estimates` (per layer).
  void planned(std::int64_t iteration, const std::vector<LayerPlacement>& before,
               const std::vector<LayerPlacement>& after, const std::vector<std::vector<double>>& estimates,
               double change_seconds);
  // One simulated iteration's counts, under the placement of the last plan.
  void step(const RoutingCounts& counts);
  // Also score each plan on other futures of the trace (as many iterations as it was realised over).
  void sample_futures(FutureSampler sampler) { futures_ = std::move(sampler); }
  // Closes the last plan and counts the replicas still alive.
  void finish();

 private:
  double seconds(const CostModel& model, LayerPlacement p, const std::vector<double>& load) const;
  // Seconds the last plan's placement saves on one iteration's counts (scoring model).
  double gain_on(const RoutingCounts& counts) const;
  void score_futures(PlanRecord& plan) const;
  void close();

  const CostModel& planner_;
  const CostModel& scorer_;
  bool live_shares_;
  PlanStats& stats_;
  std::vector<LayerPlacement> before_, after_;
  std::vector<std::vector<std::int64_t>> born_;  // [layer][expert * ranks + rank]: iteration added, -1 = none
  double realised_sum_ = 0;
  FutureSampler futures_;
};

}  // namespace skew::placement
