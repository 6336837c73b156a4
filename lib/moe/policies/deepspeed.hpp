// DeepSpeed-MoE as its users run it: deepspeed/moe/sharded_moe.py, TopKGate + MOELayer (GShard's
// Algorithm 2), with deepspeed.moe.layer.MoE's defaults.
//
// drop_tokens = true: every rank dispatches a fixed [experts, capacity, d_model] buffer, where
//   capacity = max(ceil(tokens / experts * capacity_factor * top_k), min_capacity)
// (`_capacity`, called with capacity_factor * 2 by top2gating and * k by topkgating; `tokens` is
// this rank's, the factor is moe.capacity_factor while training and moe.eval_capacity_factor in
// evaluation). Each expert's slots are filled with the tokens it keeps and the rest stay zero;
// after the all-to-all every expert computes its FFN over ranks * capacity rows, padding
// included (the cost DeepSpeed pays), and a dropped assignment contributes nothing to its token.
// Which assignments an overfull expert keeps:
//   top-1 with use_rts (DeepSpeed's default): `capacity` of its tokens chosen at random (RTS:
//     top1gating ranks mask * uniform noise); here a Philox draw per token keyed by (seed,
//     iteration, layer, training, rank), so a step is reproducible and a resume bit-exact.
//   top-1 without it: the earliest tokens (top1gating takes topk of the 0/1 mask, whose tie
//     order torch leaves open; we pick position).
//   top-2: first choices before second ones, earlier tokens first (top2gating shifts the second
//     choices' buffer locations by the expert's first-choice count); use_rts does not apply.
//   top-k > 2: token order (topkgating's "position": a cumsum over tokens).
//   drop_policy = probability: the most probable assignments (topkgating's "probs" policy,
//     applied at every k here; DeepSpeed's top-1 and top-2 gates do not offer it).
// drop_tokens = false (dropless): nothing is dropped and every expert's block is padded to the
// largest (rank, expert) count over the group (top1gating / top2gating all-reduce MAX of
// exp_counts), with no min_capacity.
//
// Not reproduced here, as they belong to the gate every policy shares (lib/moe/gate.*): top-2's
// renormalisation of the kept gate weights and its Gumbel sampling of the second expert.
// Placement as in StaticPolicy: one replica per expert.
#pragma once
#include <cstdint>

#include "lib/moe/policies/static.hpp"

namespace skew::moe {

struct DeepSpeedOptions {
  double capacity_factor_train = 1.0, capacity_factor_eval = 1.0;
  std::int64_t min_capacity = 4;
  bool drop_tokens = true;           // false: dropless, every expert padded to the largest load
  bool use_rts = true;               // top-1: random token selection
  bool drop_by_probability = false;  // keep the most probable assignments rather than by position
};

template <class T>
class DeepSpeedPolicy : public StaticPolicy<T> {
 public:
  explicit DeepSpeedPolicy(DeepSpeedOptions options) : opt_(options) {}
  void keep(const LayerView<T>& layer, bool training, std::vector<char>& kept) const override;
  std::int64_t pad(const LayerView<T>& layer, std::vector<std::int64_t>& block) const override;
  // Slots per expert in this rank's dispatch buffer for the layer's current step.
  std::int64_t capacity(const LayerView<T>& layer, bool training) const;

 private:
  DeepSpeedOptions opt_;
};

}  // namespace skew::moe
