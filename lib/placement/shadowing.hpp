// FasterMoE's dynamic shadowing decision (He et al., PPoPP 2022) on FlexMoE's cost model
// (cost_model.hpp), so that both policies judge a step with the same measured constants:
// a shadowed expert's parameters go from its owner to every rank, each rank computes its own
// tokens of it, and the shadows' gradients return to the owner (the volume of one ring
// all-reduce of the expert's gradient over all ranks). The hottest experts are shadowed, one at a
// time, while the predicted step time falls.
#pragma once
#include <cstdint>
#include <vector>

#include "lib/placement/cost_model.hpp"

namespace skew::placement {

// One layer's routing as the shadowing decision sees it.
struct ShadowRouting {
  int ranks = 1;
  std::vector<int> owner;      // owner[e]: the rank holding expert e's only replica
  std::vector<double> global;  // tokens routed to expert e over all ranks
  // local[r * E + e]: tokens rank r routes to expert e; empty = every rank routes global[e] / ranks.
  std::vector<double> local;

  int num_experts() const { return static_cast<int>(owner.size()); }
  double local_tokens(int rank, int expert) const;
};

// Every rank routes counts[e] / gpus to expert e, held in contiguous blocks (the simulator's case).
ShadowRouting uniform_routing(const std::vector<std::int64_t>& counts, int gpus);
// Measured routing: local[r * E + e] per source rank (moe_train's all-gathered gate counts).
ShadowRouting measured_routing(const std::vector<std::int64_t>& local, const std::vector<int>& owner, int ranks);

// Predicted seconds of the layer's step with `shadowed` experts computed where their tokens are:
// busiest rank's expert compute and the all-to-all of the others' tokens under `schedule`
// (CostModel::scheduled_seconds, the overlap model every policy gets: FasterMoE's smart
// schedule is a pipelined one), plus the shadows' parameter broadcast and gradient reduce, paid
// every step and not overlapped.
// `balance`, when given, receives the resulting max/mean rank load.
double shadowed_seconds(const CostModel& model, const ShadowRouting& routing, const std::vector<char>& shadowed,
                        const ExchangeSchedule& schedule, double* balance = nullptr);

struct ShadowDecision {
  std::vector<int> shadowed;  // ascending expert ids
  double seconds = 0;         // predicted step time with them
  double balance = 1;         // max/mean rank load with them
};

// Greedy from the hottest expert (most tokens, ties to the lower id) down, stopping at the first
// shadow that does not lower the predicted time. One rank shadows nothing.
ShadowDecision choose_shadows(const CostModel& model, const ShadowRouting& routing, const ExchangeSchedule& schedule);

}  // namespace skew::placement
