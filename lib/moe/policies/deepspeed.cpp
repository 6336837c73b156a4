#include "lib/moe/policies/deepspeed.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/placement/deepspeed_capacity.hpp"

namespace skew::moe {

namespace {
// Philox stream of random token selection, apart from the jitter's streams (small numbers keyed
// by iteration and layer) by its top byte.
std::uint64_t rts_stream(const StepContext& step) {
  const std::uint64_t tag = 0xD5ULL << 56;
  const std::uint64_t phase = static_cast<std::uint64_t>(step.iteration) * 2 + (step.training ? 0 : 1);
  return tag ^ (phase << 12) ^ static_cast<std::uint64_t>(step.layer);
}
}  // namespace

template <class T>
std::int64_t DeepSpeedPolicy<T>::capacity(const LayerView<T>& layer, bool training) const {
  const GateOptions& gate = layer.options().gate;
  return placement::deepspeed_capacity(static_cast<double>(layer.gate_state().n), gate.num_experts, gate.top_k,
                                       training ? opt_.capacity_factor_train : opt_.capacity_factor_eval,
                                       opt_.min_capacity);
}

template <class T>
void DeepSpeedPolicy<T>::keep(const LayerView<T>& layer, bool training, std::vector<char>& kept) const {
  if (!opt_.drop_tokens) return;
  const GateState<T>& gate = layer.gate_state();
  const int E = layer.options().gate.num_experts, k = layer.options().gate.top_k;
  const int n = static_cast<int>(kept.size()) / k;
  const std::int64_t cap = capacity(layer, training);
  // The fill order needs every choice on the host: n * k ids (and weights when they decide),
  // copied from the device when the layer runs there.
  const std::vector<std::int32_t> expert = gate.expert.host_copy();
  // Each expert's assignments in the order DeepSpeed fills its buffer slots: choice-major for
  // top-2 (all first choices, then the second ones), token order otherwise.
  std::vector<std::vector<std::int64_t>> by_expert(static_cast<std::size_t>(E));
  const bool choice_major = k == 2;
  for (int outer = 0; outer < (choice_major ? k : n); ++outer)
    for (int inner = 0; inner < (choice_major ? n : k); ++inner) {
      const std::int64_t a =
          choice_major ? static_cast<std::int64_t>(inner) * k + outer : static_cast<std::int64_t>(outer) * k + inner;
      by_expert[static_cast<std::size_t>(expert[static_cast<std::size_t>(a)])].push_back(a);
    }
  // Priority of each assignment (higher is kept first); none: the fill order decides.
  std::vector<double> priority;
  if (k == 1 && opt_.use_rts && !opt_.drop_by_probability) {
    // One draw per token, in token order, so a token's chance does not depend on the routing of
    // the others; ranks draw from disjoint ranges of the stream.
    const StepContext& step = layer.step();
    Rng rng(step.seed, rts_stream(step), static_cast<std::uint64_t>(layer.world().rank()) << 40);
    priority.resize(static_cast<std::size_t>(n));
    for (auto& p : priority) p = static_cast<double>(rng.next_u32());
  } else if (opt_.drop_by_probability) {
    const std::vector<T> weight = gate.weight.host_copy();
    priority.assign(weight.begin(), weight.end());
  }
  for (auto& list : by_expert) {
    if (static_cast<std::int64_t>(list.size()) <= cap) continue;
    if (!priority.empty())
      std::stable_sort(list.begin(), list.end(), [&](std::int64_t a, std::int64_t b) {
        return priority[static_cast<std::size_t>(a)] > priority[static_cast<std::size_t>(b)];
      });
    for (std::size_t i = static_cast<std::size_t>(cap); i < list.size(); ++i)
      kept[static_cast<std::size_t>(list[i])] = 0;
  }
}

// Pads every expert's rows from this rank, in the block of its first replica, to the buffer's
// capacity (drop_tokens) or to the largest block over all ranks and experts (dropless).
template <class T>
std::int64_t DeepSpeedPolicy<T>::pad(const LayerView<T>& layer, std::vector<std::int64_t>& block) const {
  const int E = layer.options().gate.num_experts, N = layer.world().size();
  std::int64_t slots = 0;
  if (opt_.drop_tokens) {
    slots = capacity(layer, layer.step().training);
  } else {
    std::vector<std::int64_t> mx = {*std::max_element(block.begin(), block.end())};
    layer.world().allreduce(comm::view(mx), comm::ReduceOp::Max);
    slots = mx[0];
  }
  std::int64_t padded = 0;
  for (int e = 0; e < E; ++e) {
    std::int64_t rows = 0;
    for (int r = 0; r < N; ++r) rows += block[static_cast<std::size_t>(r * E + e)];
    SKEW_CHECK(rows <= slots, "deepspeed: rank " << layer.world().rank() << " keeps " << rows << " rows of expert " << e
                                                 << ", more than its " << slots << " slots");
    const int owner = layer.placement().experts[static_cast<std::size_t>(e)][0].rank;
    block[static_cast<std::size_t>(owner * E + e)] += slots - rows;
    padded += slots - rows;
  }
  return padded;
}

template class DeepSpeedPolicy<float>;
template class DeepSpeedPolicy<double>;

}  // namespace skew::moe
