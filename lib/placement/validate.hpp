// Checks the cost model against a measured run: moe_train's JSONL metrics carry per iteration
// the routing counts (tokens_per_expert) and rank 0's measured expert compute and all-to-all
// seconds (time.expert, time.alltoall); the model predicts both for the block placement.
#pragma once
#include <string>
#include <vector>

#include "lib/placement/cost_model.hpp"
#include "lib/placement/trace.hpp"

namespace skew::placement {

struct MeasuredRun {
  RoutingTrace trace;
  std::vector<double> expert_seconds, alltoall_seconds;  // rank 0's, per iteration
};

MeasuredRun read_measured_jsonl(const std::string& path);

struct Validation {
  int iterations = 0;                                // compared (the first, warm-up iteration is skipped)
  double predicted_expert = 0, measured_expert = 0;  // mean seconds per iteration
  double predicted_alltoall = 0, measured_alltoall = 0;
  double expert_error() const { return (predicted_expert - measured_expert) / measured_expert; }
  double alltoall_error() const { return (predicted_alltoall - measured_alltoall) / measured_alltoall; }
};

// Rank 0's expert compute and the all-to-all, predicted for the block placement over `ranks`.
Validation validate_cost_model(const CostModel& model, const MeasuredRun& run, int ranks);

}  // namespace skew::placement
