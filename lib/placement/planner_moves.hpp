// The candidate moves of FlexMoE's planner (planner.cpp) on one layer's placement, the paper's
// operations under the slot budget: expand (a new replica where there is room), shrink (drop a
// replica), shift (shrink one expert to expand another) and migrate (move a replica, or swap two
// between a busy and a full rank).
#pragma once
#include <vector>

#include "lib/placement/planner.hpp"

namespace skew::placement::moves {

using Reps = std::vector<Replica>;

bool holds(const Reps& reps, int rank);
void add_replica(LayerPlacement& p, int expert, int rank);
void remove_replica(LayerPlacement& p, int expert, int rank);

struct Candidate {
  LayerPlacement placement;
  PlacementChange change;
};

// Every candidate move from `p` under `load` (`rank_loads`: CostModel::rank_loads of both):
// expanding each of the few hottest experts (per
// replica) on the least loaded ranks with room, shrinking or shifting the few coldest replicated
// ones, and expanding, migrating or swapping the experts of the busiest rank.
std::vector<Candidate> candidates(const LayerPlacement& p, std::vector<double> rank_loads,
                                  const std::vector<double>& load);

}  // namespace skew::placement::moves
