#include "lib/moe/policies/flexmoe.hpp"

#include "lib/moe/moe_layer.hpp"
#include "lib/placement/planner.hpp"

namespace skew::moe {

// Live shares: the planner fixed where replicas live; this step's own counts decide how the
// tokens are split among them (every rank computes the same shares from the same counts).
template <class T>
placement::LayerPlacement FlexMoePolicy<T>::replica_shares(const MoeLayer<T>& layer,
                                                           const std::vector<std::int64_t>& all_counts) const {
  placement::LayerPlacement shares = layer.placement();
  if (!live_shares_) return shares;
  const int E = shares.num_experts(), N = layer.world().size();
  std::vector<double> global(static_cast<std::size_t>(E), 0.0);
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e)
      global[static_cast<std::size_t>(e)] += static_cast<double>(all_counts[static_cast<std::size_t>(r) * E + e]);
  placement::assign_shares(shares, global, true);
  return shares;
}

template class FlexMoePolicy<float>;
template class FlexMoePolicy<double>;

}  // namespace skew::moe
