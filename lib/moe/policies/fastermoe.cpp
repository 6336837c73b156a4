#include "lib/moe/policies/fastermoe.hpp"

#include <algorithm>
#include <numeric>

#include "lib/moe/moe_layer.hpp"

namespace skew::moe {

namespace {
// Tags of shadow gradient messages: this base plus the expert id.
constexpr int kShadowGradTag = 9100;
}  // namespace

std::vector<int> choose_shadows(const std::vector<std::int64_t>& local, const std::vector<int>& owner, int ranks,
                                const ShadowCosts& costs) {
  const int E = static_cast<int>(owner.size());
  std::vector<double> global(static_cast<std::size_t>(E), 0.0);
  for (int r = 0; r < ranks; ++r)
    for (int e = 0; e < E; ++e)
      global[static_cast<std::size_t>(e)] += static_cast<double>(local[static_cast<std::size_t>(r * E + e)]);
  std::vector<char> shadowed(static_cast<std::size_t>(E), 0);
  int count = 0;
  auto predicted = [&]() {
    double worst = 0;
    for (int r = 0; r < ranks; ++r) {
      double work = 0, moved = 0;
      for (int e = 0; e < E; ++e) {
        const double mine = static_cast<double>(local[static_cast<std::size_t>(r * E + e)]);
        if (shadowed[static_cast<std::size_t>(e)])
          work += mine;
        else if (owner[static_cast<std::size_t>(e)] == r)
          work += global[static_cast<std::size_t>(e)];
        else
          moved += mine;
      }
      worst = std::max(worst, work * costs.sec_per_token + moved * costs.sec_per_row_moved);
    }
    return worst + count * costs.sec_per_shadow;
  };
  std::vector<int> hot(static_cast<std::size_t>(E));
  std::iota(hot.begin(), hot.end(), 0);
  std::stable_sort(hot.begin(), hot.end(), [&](int a, int b) {
    return global[static_cast<std::size_t>(a)] > global[static_cast<std::size_t>(b)];
  });
  double best = predicted();
  std::vector<int> out;
  for (int e : hot) {
    shadowed[static_cast<std::size_t>(e)] = 1, ++count;
    const double t = predicted();
    if (t >= best) break;
    best = t;
    out.push_back(e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <class T>
FasterMoePolicy<T>::FasterMoePolicy(FasterMoeOptions options, int d_model, int d_ff, std::int64_t expert_params) {
  costs_.sec_per_token = 3.0 * 4.0 * d_model * d_ff / (options.gflops * 1e9);  // fwd + bwd flops
  costs_.sec_per_row_moved = 2.0 * 2.0 * d_model * sizeof(T) / (options.gbps * 1e9);
  costs_.sec_per_shadow = 2.0 * static_cast<double>(expert_params) * sizeof(T) / (options.gbps * 1e9);
}

// Every rank picks the same shadows from the all-gathered counts.
template <class T>
void FasterMoePolicy<T>::plan(MoeLayer<T>& layer) {
  comm::ProcessGroup& world = layer.world();
  const int E = layer.options().gate.num_experts, N = world.size();
  layer.set_shadowed({});
  if (N == 1) return;
  std::vector<std::int64_t> local(static_cast<std::size_t>(N) * E);
  world.allgather(comm::cview(layer.gate_state().local_counts), comm::view(local));
  std::vector<int> owner;
  for (const auto& reps : layer.placement().experts) owner.push_back(reps[0].rank);
  layer.set_shadowed(choose_shadows(local, owner, N, costs_));
  const std::size_t P = static_cast<std::size_t>(layer.options().expert_params());
  for (int e : layer.shadowed()) {
    if (owner[static_cast<std::size_t>(e)] == world.rank()) {
      layer.times().sync_bytes += static_cast<double>(P) * sizeof(T);
      world.broadcast(comm::view(layer.experts().at(e).w), owner[static_cast<std::size_t>(e)]);
    } else {
      ShadowCopy<T>& copy = layer.shadow(e);
      copy.w.assign(P, T(0));
      copy.g.assign(P, T(0));
      world.broadcast(comm::view(copy.w), owner[static_cast<std::size_t>(e)]);
    }
  }
}

template <class T>
void FasterMoePolicy<T>::reduce_grads(MoeLayer<T>& layer) {
  if (!layer.shadowed().empty()) reduce_shadow_grads(layer);
  for (int e = 0; e < layer.placement().num_experts(); ++e)
    if (!layer.is_shadowed(e)) StaticPolicy<T>::allreduce_replicas(layer, e);
  layer.drop_shadow_copies();
}

template <class T>
void FasterMoePolicy<T>::record(const typename BalancingPolicy<T>::Layers& layers, Json& record) const {
  Json shadows = Json::array();
  for (const auto& layer : layers) shadows.push_back(layer->shadowed());
  record["shadowed"] = shadows;
}

// Every other rank sends its shadow gradients to the owner, which adds them in rank order
// (deterministic); all shadows' messages go in one batch.
template <class T>
void FasterMoePolicy<T>::reduce_shadow_grads(MoeLayer<T>& layer) {
  comm::ProcessGroup& world = layer.world();
  const int me = world.rank();
  const auto P = static_cast<std::size_t>(layer.options().expert_params());
  std::vector<comm::P2POp> ops;
  std::vector<std::pair<int, std::vector<std::vector<T>>>> received;  // owner side: (expert, per-rank gradients)
  for (int e : layer.shadowed()) {
    const int owner = layer.placement().experts[static_cast<std::size_t>(e)][0].rank;
    if (owner != me) {
      layer.times().sync_bytes += static_cast<double>(P) * sizeof(T);
      ops.push_back(comm::send_op(comm::view(layer.shadow(e).g), owner, kShadowGradTag + e));
      continue;
    }
    received.push_back({e, std::vector<std::vector<T>>(static_cast<std::size_t>(world.size()))});
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
      for (std::size_t i = 0; i < part.size(); ++i) g[i] += part[i];
  }
}

template class FasterMoePolicy<float>;
template class FasterMoePolicy<double>;

}  // namespace skew::moe
