// FasterMoE's shadowing decision: which hot experts to replicate on every rank this iteration
// (parameters broadcast, each rank computes its own tokens of them, gradients reduced back),
// chosen greedily from the hottest expert down while the modelled step time falls.
#pragma once
#include <cstdint>
#include <vector>

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

}  // namespace skew::moe
