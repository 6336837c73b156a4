// FasterMoE's dynamic shadowing (He et al., PPoPP 2022): every iteration, after the gate, the
// hottest experts are "shadowed": their owner broadcasts their parameters to every rank, each
// rank computes its own tokens of them locally instead of sending them away, and the shadows'
// gradients are reduced back to the owner, the only rank that updates the expert. Which experts
// to shadow is chosen greedily from the hottest down while the modelled step time (expert
// compute + token traffic + shadow broadcast) falls. The rest as in StaticPolicy. (FasterMoE's
// smart scheduling, pipelining all-to-all with expert compute, is not modelled here.)
#pragma once
#include <cstdint>
#include <vector>

#include "lib/moe/policies/static.hpp"

namespace skew::moe {

struct ShadowCosts {
  double sec_per_token = 0;      // expert compute per routed token (forward + backward)
  double sec_per_row_moved = 0;  // sending a token to another rank and its result back
  double sec_per_shadow = 0;     // broadcasting one expert's parameters and reducing its gradients
};

// local[r * E + e]: tokens rank r routes to expert e; owner[e]: the rank holding expert e.
// Modelled step = max over ranks of (expert work + token traffic) + shadows * sec_per_shadow.
// Returns the shadowed experts in ascending order.
std::vector<int> choose_shadows(const std::vector<std::int64_t>& local, const std::vector<int>& owner, int ranks,
                                const ShadowCosts& costs);

struct FasterMoeOptions {
  double gflops = 20.0, gbps = 5.0;  // the cost model's expert GEMM throughput and network bandwidth per rank
};

template <class T>
class FasterMoePolicy : public StaticPolicy<T> {
 public:
  // `d_model`, `d_ff` and `expert_params` size the modelled compute and traffic.
  FasterMoePolicy(FasterMoeOptions options, int d_model, int d_ff, std::int64_t expert_params);
  // Chooses this step's shadows from all ranks' counts and broadcasts their parameters.
  void plan(MoeLayer<T>& layer) override;
  // Reduces the shadows' gradients to their owners, then the replicas' as StaticPolicy does.
  void reduce_grads(MoeLayer<T>& layer) override;
  // The record's "shadowed": per layer, the experts shadowed this iteration.
  void record(const typename BalancingPolicy<T>::Layers& layers, Json& record) const override;

 private:
  void reduce_shadow_grads(MoeLayer<T>& layer);
  ShadowCosts costs_;
};

}  // namespace skew::moe
