#include "lib/moe/policies/fastermoe.hpp"

#include <type_traits>

#include "core/log.hpp"
#include "kernels/moe_elementwise.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/placement/shadowing.hpp"

namespace skew::moe {

namespace {
// Tags of shadow gradient messages: this base plus the expert id.
constexpr int kShadowGradTag = 9100;

// x += y, n elements on `device` (float64 layers run on the host only).
template <class T>
void add_into(Device device, std::size_t n, T* x, const T* y) {
  if constexpr (std::is_same_v<T, float>) {
    kernels::moe::add_inplace(device, n, x, y);
  } else {
    SKEW_CHECK(device == Device::Host, "fastermoe: float64 shadow gradients are reduced on the host only");
    for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
  }
}
}  // namespace

// Every rank picks the same shadows from the all-gathered counts. Naming a step's shadows drops
// the previous step's copies and marks the layer's bf16 weight copies stale.
template <class T>
void FasterMoePolicy<T>::plan(LayerView<T>& layer) {
  comm::ProcessGroup& world = layer.world();
  const int E = layer.options().gate.num_experts, N = world.size();
  Shadows& shadows = shadows_[&layer];
  const auto name_shadows = [&](std::vector<int> experts) {
    shadows.experts = std::move(experts);
    shadows.flag.assign(static_cast<std::size_t>(E), 0);
    for (int e : shadows.experts) shadows.flag[static_cast<std::size_t>(e)] = 1;
    shadows.copies.clear();
    layer.weights_changed();
  };
  name_shadows({});
  if (N == 1) return;
  std::vector<std::int64_t> local(static_cast<std::size_t>(N) * E);
  world.allgather(comm::cview(layer.gate_state().local_counts), comm::view(local));
  std::vector<int> owner;
  for (const auto& reps : layer.placement().experts) owner.push_back(reps[0].rank);
  // The smart schedule's stages are the cost model's pipeline stages (N peers x chunks each);
  // without it (0 chunks) the all-to-all and the expert compute run one after the other.
  const int chunks = layer.options().schedule_chunks;
  const placement::ExchangeSchedule schedule{chunks > 0 ? placement::Overlap::Pipelined : placement::Overlap::None,
                                             chunks > 0 ? N * chunks : 1};
  name_shadows(placement::choose_shadows(model_, placement::measured_routing(local, owner, N), schedule).shadowed);
  const std::size_t P = static_cast<std::size_t>(layer.options().expert_params());
  for (int e : shadows.experts) {
    if (owner[static_cast<std::size_t>(e)] == world.rank()) {
      layer.times().sync_bytes += static_cast<double>(P) * sizeof(T);
      world.broadcast(comm::view(layer.experts().at(e).w), owner[static_cast<std::size_t>(e)]);
    } else {
      Copy& copy = lend(layer, shadows, e);  // on the layer's device
      copy.w.zeros(P);
      copy.g.zeros(P);
      world.broadcast(comm::view(copy.w), owner[static_cast<std::size_t>(e)]);
    }
  }
}

template <class T>
typename FasterMoePolicy<T>::Copy& FasterMoePolicy<T>::lend(LayerView<T>& layer, Shadows& shadows, int e) {
  layer.weights_changed();
  return shadows.copies.try_emplace(e, layer.options().device).first->second;
}

template <class T>
const std::vector<int>& FasterMoePolicy<T>::shadowed(const LayerView<T>& layer) const {
  static const std::vector<int> none;
  const auto it = shadows_.find(&layer);
  return it == shadows_.end() ? none : it->second.experts;
}

template <class T>
bool FasterMoePolicy<T>::computed_where_routed(const LayerView<T>& layer, int e) const {
  const auto it = shadows_.find(&layer);
  return it != shadows_.end() && !it->second.flag.empty() && it->second.flag[static_cast<std::size_t>(e)];
}

template <class T>
typename FasterMoePolicy<T>::Copy* FasterMoePolicy<T>::copy_of(const LayerView<T>& layer, int e) {
  const auto it = shadows_.find(&layer);
  if (it == shadows_.end()) return nullptr;
  const auto copy = it->second.copies.find(e);
  return copy == it->second.copies.end() ? nullptr : &copy->second;
}

template <class T>
T* FasterMoePolicy<T>::lent_params(const LayerView<T>& layer, int e) {
  Copy* copy = copy_of(layer, e);
  return copy ? copy->w.data() : nullptr;
}

template <class T>
T* FasterMoePolicy<T>::lent_grads(const LayerView<T>& layer, int e) {
  Copy* copy = copy_of(layer, e);
  return copy ? copy->g.data() : nullptr;
}

template <class T>
void FasterMoePolicy<T>::reduce_grads(LayerView<T>& layer) {
  Shadows& shadows = shadows_[&layer];
  if (!shadows.experts.empty()) reduce_shadow_grads(layer, shadows);
  for (int e = 0; e < layer.placement().num_experts(); ++e)
    if (!computed_where_routed(layer, e)) StaticPolicy<T>::allreduce_replicas(layer, e);
  shadows.copies.clear();
}

template <class T>
void FasterMoePolicy<T>::record(const typename BalancingPolicy<T>::Layers& layers, Json& record) const {
  Json shadows = Json::array();
  for (const auto& layer : layers) shadows.push_back(shadowed(*layer));
  record["shadowed"] = shadows;
}

// Every other rank sends its shadow gradients to the owner, which adds them in rank order
// (deterministic); all shadows' messages go in one batch.
template <class T>
void FasterMoePolicy<T>::reduce_shadow_grads(LayerView<T>& layer, Shadows& shadows) {
  comm::ProcessGroup& world = layer.world();
  const int me = world.rank();
  const auto P = static_cast<std::size_t>(layer.options().expert_params());
  const Device device = layer.options().device;
  std::vector<comm::P2POp> ops;
  // Owner side: (expert, per-rank gradients), on the layer's device; this rank's own entry stays empty.
  std::vector<std::pair<int, std::vector<DeviceArray<T>>>> received;
  for (int e : shadows.experts) {
    const int owner = layer.placement().experts[static_cast<std::size_t>(e)][0].rank;
    if (owner != me) {
      layer.times().sync_bytes += static_cast<double>(P) * sizeof(T);
      ops.push_back(comm::send_op(comm::view(lend(layer, shadows, e).g), owner, kShadowGradTag + e));
      continue;
    }
    received.push_back(
        {e, std::vector<DeviceArray<T>>(static_cast<std::size_t>(world.size()), DeviceArray<T>(device))});
  }
  for (auto& [e, from] : received)
    for (int r = 0; r < world.size(); ++r)
      if (r != me) {
        from[static_cast<std::size_t>(r)].resize(P);
        ops.push_back(comm::recv_op(comm::view(from[static_cast<std::size_t>(r)]), r, kShadowGradTag + e));
      }
  if (!ops.empty()) world.batch_isend_irecv(ops)->wait();
  for (auto& [e, from] : received) {
    T* g = layer.experts().at(e).g.data();
    for (const auto& part : from)
      if (!part.empty()) add_into(device, part.size(), g, part.data());
  }
}

template <class T>
void FasterMoePolicy<T>::summarise(Json& summary) const {
  summary["cost_constants"] = placement::cost_constants_summary(model_.constants());
}

template <class T>
std::shared_ptr<FasterMoePolicy<T>> make_fastermoe(const placement::PlacementOptions& placement,
                                                   comm::ProcessGroup& world, const MoeOptions& options) {
  placement::ExpertShape shape = placement.shape;
  shape.params = options.expert_params();
  shape.hidden_dim = options.d_model;
  const placement::CostConstants constants = placement::measure_constants(world, placement.cost_overrides, shape);
  SKEW_INFO("fastermoe cost model: gemm " << constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all "
                                          << constants.alltoall_bandwidth / 1e9 << " GB/s, all-reduce "
                                          << constants.allreduce_bandwidth / 1e9 << " GB/s");
  return std::make_shared<FasterMoePolicy<T>>(placement::CostModel(constants, shape));
}

template class FasterMoePolicy<float>;
template class FasterMoePolicy<double>;
template std::shared_ptr<FasterMoePolicy<float>> make_fastermoe<float>(const placement::PlacementOptions&,
                                                                       comm::ProcessGroup&, const MoeOptions&);
template std::shared_ptr<FasterMoePolicy<double>> make_fastermoe<double>(const placement::PlacementOptions&,
                                                                         comm::ProcessGroup&, const MoeOptions&);

}  // namespace skew::moe
