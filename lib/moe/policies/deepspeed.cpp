#include "lib/moe/policies/deepspeed.hpp"

#include <algorithm>
#include <cmath>

#include "lib/moe/moe_layer.hpp"

namespace skew::moe {

template <class T>
void DeepSpeedPolicy<T>::keep(const MoeLayer<T>& layer, bool training, std::vector<char>& kept) const {
  if (!opt_.drop_tokens) return;
  const GateState<T>& gate = layer.gate_state();
  const int E = layer.options().gate.num_experts, k = layer.options().gate.top_k;
  const int n = static_cast<int>(kept.size()) / k;
  const double factor = training ? opt_.capacity_factor_train : opt_.capacity_factor_eval;
  const std::int64_t capacity = static_cast<std::int64_t>(std::ceil(static_cast<double>(n) / E * factor)) * k;
  std::vector<std::vector<std::int64_t>> by_expert(static_cast<std::size_t>(E));
  for (int j = 0; j < k; ++j)
    for (int t = 0; t < n; ++t) {
      const std::int64_t a = static_cast<std::int64_t>(t) * k + j;
      by_expert[static_cast<std::size_t>(gate.expert[static_cast<std::size_t>(a)])].push_back(a);
    }
  for (auto& list : by_expert) {
    if (opt_.drop_by_probability)
      std::stable_sort(list.begin(), list.end(), [&](std::int64_t a, std::int64_t b) {
        return gate.weight[static_cast<std::size_t>(a)] > gate.weight[static_cast<std::size_t>(b)];
      });
    for (std::size_t i = static_cast<std::size_t>(capacity); i < list.size(); ++i)
      kept[static_cast<std::size_t>(list[i])] = 0;
  }
}

// Pads every expert's block, on the rank of its first replica, to the largest block over all
// ranks and experts.
template <class T>
std::int64_t DeepSpeedPolicy<T>::pad(const MoeLayer<T>& layer, std::vector<std::int64_t>& block) const {
  if (opt_.drop_tokens) return 0;
  const int E = layer.options().gate.num_experts;
  std::vector<std::int64_t> mx = {*std::max_element(block.begin(), block.end())};
  layer.world().allreduce(comm::view(mx), comm::ReduceOp::Max);
  std::int64_t padded = 0;
  for (int e = 0; e < E; ++e) {
    const int owner = layer.placement().experts[static_cast<std::size_t>(e)][0].rank;
    padded += mx[0] - block[static_cast<std::size_t>(owner * E + e)];
    block[static_cast<std::size_t>(owner * E + e)] = mx[0];
  }
  return padded;
}

template class DeepSpeedPolicy<float>;
template class DeepSpeedPolicy<double>;

}  // namespace skew::moe
