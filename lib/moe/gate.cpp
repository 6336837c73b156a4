#include "lib/moe/gate.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/moe_gate.hpp"
#include "lib/core/error.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {
namespace {
// The router stays in fp32 under mixed precision (Switch Transformer's selective precision): bf16
// logits would flip near-tied top-k choices and make the routing itself noisy.
constexpr Precision kRouterPrecision = Precision::Fp32;
}  // namespace

template <class T>
void gate_forward(const GateOptions& opt, int n, int d, const T* x, const T* wg, const T* jitter,
                  const std::int32_t* forced, const SumReducer& reduce, GateState<T>& s) {
  const int E = opt.num_experts, k = opt.top_k;
  const std::size_t nd = static_cast<std::size_t>(n) * d;
  s.n = n, s.d = d;
  s.input.assign(x, x + nd);
  s.jitter.clear();
  if (jitter) {
    s.jitter.assign(jitter, jitter + nd);
    for (std::size_t i = 0; i < nd; ++i) s.input[i] *= jitter[i];
  }
  s.probs.assign(static_cast<std::size_t>(n) * E, T(0));
  matmul<T>(false, false, n, E, d, T(1), s.input.data(), wg, T(0), s.probs.data(), kRouterPrecision);
  s.lse.assign(static_cast<std::size_t>(n), T(0));
  s.expert.assign(static_cast<std::size_t>(n) * k, 0);
  s.weight.assign(static_cast<std::size_t>(n) * k, T(0));
  if constexpr (std::is_same_v<T, float>) {
    kernels::moe::softmax_topk(Device::Host, n, E, k, s.probs.data(), s.probs.data(), s.lse.data(), s.expert.data(),
                               s.weight.data());
  } else {
    kernels::moe::softmax_topk(n, E, k, s.probs.data(), s.probs.data(), s.lse.data(), s.expert.data(), s.weight.data());
  }
  s.local_counts.assign(static_cast<std::size_t>(E), 0);
  std::vector<double> stats(2 * static_cast<std::size_t>(E) + 2, 0.0);  // [sum p | counts | tokens | sum lse^2]
  for (int t = 0; t < n; ++t) {
    const T* p = s.probs.data() + static_cast<std::size_t>(t) * E;
    for (int j = 0; j < k; ++j) {
      const std::size_t a = static_cast<std::size_t>(t) * k + j;
      if (forced) {  // a replayed trace
        SKEW_CHECK(forced[a] >= 0 && forced[a] < E, "replayed expert " << forced[a] << " outside [0, " << E << ")");
        s.expert[a] = forced[a], s.weight[a] = p[forced[a]];
      }
      ++s.local_counts[static_cast<std::size_t>(s.expert[a])];
    }
    for (int e = 0; e < E; ++e) stats[static_cast<std::size_t>(e)] += p[e];
    stats[2 * static_cast<std::size_t>(E) + 1] +=
        static_cast<double>(s.lse[static_cast<std::size_t>(t)]) * s.lse[static_cast<std::size_t>(t)];
  }
  for (int e = 0; e < E; ++e)
    stats[static_cast<std::size_t>(E + e)] = static_cast<double>(s.local_counts[static_cast<std::size_t>(e)]);
  stats[2 * static_cast<std::size_t>(E)] = n;
  reduce(stats);
  s.global_tokens = stats[2 * static_cast<std::size_t>(E)];
  s.ce.assign(static_cast<std::size_t>(E), 0.0);
  s.global_counts.assign(static_cast<std::size_t>(E), 0);
  double aux = 0;
  for (int e = 0; e < E; ++e) {
    s.global_counts[static_cast<std::size_t>(e)] = std::llround(stats[static_cast<std::size_t>(E + e)]);
    s.ce[static_cast<std::size_t>(e)] = stats[static_cast<std::size_t>(E + e)] / (s.global_tokens * k);
    aux += stats[static_cast<std::size_t>(e)] / s.global_tokens * s.ce[static_cast<std::size_t>(e)];
  }
  s.aux_loss = opt.aux_weight * E * aux;
  s.z_loss = opt.z_weight * stats[2 * static_cast<std::size_t>(E) + 1] / s.global_tokens;
}

template <class T>
void gate_backward(const GateOptions& opt, const GateState<T>& s, const T* wg, const T* dweight, T* dx, T* dwg) {
  const int E = opt.num_experts, k = opt.top_k, n = s.n, d = s.d;
  std::vector<T> dlogits(static_cast<std::size_t>(n) * E);
  std::vector<double> dp(static_cast<std::size_t>(E));
  for (int t = 0; t < n; ++t) {
    const T* p = s.probs.data() + static_cast<std::size_t>(t) * E;
    for (int e = 0; e < E; ++e)
      dp[static_cast<std::size_t>(e)] = opt.aux_weight * E * s.ce[static_cast<std::size_t>(e)] / s.global_tokens;
    for (int j = 0; j < k; ++j)
      dp[static_cast<std::size_t>(s.expert[static_cast<std::size_t>(t) * k + j])] +=
          dweight[static_cast<std::size_t>(t) * k + j];
    double dot = 0;
    for (int e = 0; e < E; ++e) dot += p[e] * dp[static_cast<std::size_t>(e)];
    const double dz = opt.z_weight * 2 * s.lse[static_cast<std::size_t>(t)] / s.global_tokens;
    for (int e = 0; e < E; ++e)
      dlogits[static_cast<std::size_t>(t) * E + e] =
          static_cast<T>(p[e] * (dp[static_cast<std::size_t>(e)] - dot) + dz * p[e]);
  }
  matmul<T>(true, false, d, E, n, T(1), s.input.data(), dlogits.data(), T(1), dwg, kRouterPrecision);
  matmul<T>(false, true, n, d, E, T(1), dlogits.data(), wg, T(0), dx, kRouterPrecision);
  if (!s.jitter.empty())
    for (std::size_t i = 0; i < s.jitter.size(); ++i) dx[i] *= s.jitter[i];
}

#define SKEW_MOE_GATE(T)                                                                                         \
  template void gate_forward<T>(const GateOptions&, int, int, const T*, const T*, const T*, const std::int32_t*, \
                                const SumReducer&, GateState<T>&);                                               \
  template void gate_backward<T>(const GateOptions&, const GateState<T>&, const T*, const T*, T*, T*);
SKEW_MOE_GATE(float)
SKEW_MOE_GATE(double)

}  // namespace skew::moe
