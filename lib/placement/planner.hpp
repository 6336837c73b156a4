// FlexMoE's planner: a search over expand / shrink / shift / migrate steps on one layer's
// placement under the slot budget (planner_moves.hpp), each step accepted only while the cost
// model predicts a per-iteration gain that clears the estimate's sampling noise and the step's
// extra change cost amortised over `interval` iterations (the steps until the next plan); when no
// single step pays, the best pair of steps (lookahead) is tried before stopping. Two variants:
//   paper  the FlexMoE paper's moves only: expand, shrink, shift (shrink one expert to expand
//          another, the paper's "rob the rich") and migrate, under the slot budget
//   hedge  the same, then the hedge move (PlannerOptions::hedge), which is not in the paper
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/placement/cost_model.hpp"

namespace skew::placement {

enum class PlannerVariant { Paper, Hedge };

struct PlannerOptions {
  PlannerVariant variant = PlannerVariant::Paper;
  int interval = 50;  // iterations a new placement is expected to live: amortises its cost
  int max_ops = 0;    // greedy steps per layer per plan; 0 = until no step pays off
  // A step's gain must clear this many standard errors of its sampling noise (0 = off): the
  // busiest ranks' token estimates have variance variance_per_token x tokens (Poisson counts:
  // 1 for one step's counts, (1 - s) / (1 + s) for an exponential average with smoothing s).
  double noise_z = 3;
  double variance_per_token = 1;
  int lookahead = 4;            // first steps tried in pairs when no single step pays (0 = greedy only)
  bool balanced_shares = true;  // false: each replica takes 1/n of its expert's tokens
  // Hedging: after the greedy search, fill free slots with replicas of the hottest experts (per
  // replica, on the load estimate) while each costs (sync + amortised move, as predicted) at
  // most this fraction of the predicted step. The estimate says they are not needed; they let
  // the runtime's live shares absorb the next shift of the load. Hedge variant only; 0 = off.
  double hedge = 0.02;
};

// One accepted greedy step, for the change log.
struct PlacementChange {
  std::int64_t iteration = 0;
  int layer = 0;
  std::string op;             // "expand", "shrink", "migrate", "shift" (shrink one expert to expand another)
                              // or "hedge" (a replica in a free slot, see PlannerOptions::hedge)
  int expert = 0;             // the expert gaining (expand, shift) or losing (shrink) a replica, or moved (migrate)
  int from_rank = -1;         // replica removed there (shrink, migrate, shift), else -1
  int to_rank = -1;           // replica added there (expand, migrate, shift), else -1
  int other_expert = -1;      // shift: the expert that gave up its slot; migrate into a full rank:
                              // the expert migrated from to_rank to from_rank in exchange
  double predicted_gain = 0;  // seconds per iteration the step saves
  double change_seconds = 0;  // extra one-off cost of the step
};

struct LayerPlan {
  LayerPlacement placement;
  std::vector<PlacementChange> changes;
  double predicted_before = 0, predicted_after = 0;  // per-iteration seconds under `load`
  double change_seconds = 0;                         // one-off cost of going from current to placement
};

// Sets every expert's replica shares for `load`: even, or water-filled so each replica set
// levels the load of the ranks it spans (a few Gauss-Seidel sweeps, hottest experts first).
void assign_shares(LayerPlacement& p, const std::vector<double>& load, bool balanced);

LayerPlan plan_layer(const CostModel& model, const LayerPlacement& current, const std::vector<double>& load,
                     const PlannerOptions& options);

}  // namespace skew::placement
