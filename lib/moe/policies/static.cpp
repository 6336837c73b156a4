#include "lib/moe/policies/static.hpp"

#include <algorithm>

#include "lib/moe/moe_layer.hpp"

namespace skew::moe {

namespace {
double ring_allreduce_share(std::size_t ranks) {
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
}
}  // namespace

template <class T>
placement::LayerPlacement StaticPolicy<T>::replica_shares(const LayerView<T>& layer,
                                                          const std::vector<std::int64_t>& /*all_counts*/) const {
  return layer.placement();
}

template <class T>
void StaticPolicy<T>::reduce_grads(LayerView<T>& layer) {
  for (int e = 0; e < layer.placement().num_experts(); ++e) allreduce_replicas(layer, e);
}

template <class T>
void StaticPolicy<T>::allreduce_replicas(LayerView<T>& layer, int e) {
  const auto& reps = layer.placement().experts[static_cast<std::size_t>(e)];
  if (reps.size() < 2 || !layer.experts().count(e)) return;
  std::vector<int> ranks;
  for (const auto& r : reps) ranks.push_back(r.rank);
  std::sort(ranks.begin(), ranks.end());
  DeviceArray<T>& g = layer.experts().at(e).g;
  layer.times().sync_bytes += ring_allreduce_share(ranks.size()) * sizeof(T) * g.size();
  layer.world().subgroup(ranks)->allreduce(comm::view(g), comm::ReduceOp::Sum);
}

template class StaticPolicy<float>;
template class StaticPolicy<double>;

}  // namespace skew::moe
