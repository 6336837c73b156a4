// Checks the cost model against a measured run, term by term. moe_train's JSONL metrics carry
// per iteration the routing counts (tokens_per_expert), every placement change, and per rank
// and layer what the rank measured itself: rows computed, expert thread CPU seconds, bytes sent
// in the all-to-all and in replica sync. The model predicts each of them from the counts and
// the placement in force (with the runtime's share rule), so each term's error is separate
// from the others and from other processes' load on the machine.
#pragma once
#include <string>
#include <vector>

#include "lib/placement/cost_model.hpp"
#include "lib/placement/trace.hpp"

namespace skew::placement {

// Per iteration, [rank][layer].
using RankLayerValues = std::vector<std::vector<double>>;

struct MeasuredRun {
  RoutingTrace trace;
  std::vector<double> alltoall_seconds;  // rank 0's wall seconds in the all-to-all, per iteration
  std::vector<RankLayerValues> rows, expert_cpu, alltoall_bytes, sync_bytes;
  // Per iteration and layer: the placement in force (block until the first change; a change
  // logged at iteration i applies to i). Empty strings = block.
  std::vector<std::vector<std::string>> placements;
};

MeasuredRun read_measured_jsonl(const std::string& path);

// Parses LayerPlacement::to_string() ("N=2 S=5 e0:0@1,1@0.5, e1:..."); throws naming the fault.
LayerPlacement parse_placement(const std::string& text);

struct Term {
  double predicted = 0, measured = 0;  // means per iteration
  double error() const { return measured != 0 ? (predicted - measured) / measured : 0.0; }
};

struct Validation {
  int iterations = 0;  // compared (the first, warm-up iteration is skipped)
  // Sums over layers of the busiest rank: rows and expert compute (predicted: rows x FLOPs per
  // token / gemm_flops; measured: thread CPU seconds).
  Term rows, compute;
  // Sums over ranks and layers of bytes sent: all-to-all (4 rounds: dispatch and combine,
  // forward and backward) and replica gradient all-reduce (ring: 2 (n-1)/n of the gradient).
  Term alltoall_bytes, sync_bytes;
  // Per layer the max over ranks of compute + bytes sent / all-to-all bandwidth, summed.
  Term step;
  Term alltoall_wall;  // predicted all-to-all seconds vs rank 0's measured wall (includes waiting)
};

// `live_shares`: replica shares re-levelled on each iteration's counts (placement.shares=live).
Validation validate_cost_model(const CostModel& model, const MeasuredRun& run, int ranks, bool live_shares);

}  // namespace skew::placement
