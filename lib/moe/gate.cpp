#include "lib/moe/gate.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_gate.hpp"
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
  namespace km = kernels::moe;
  const int E = opt.num_experts, k = opt.top_k;
  const Device device = s.device();
  const std::size_t nd = static_cast<std::size_t>(n) * d, nk = static_cast<std::size_t>(n) * k;
  s.n = n, s.d = d;
  s.input.assign_from(x, nd);
  s.jitter.clear();
  if (jitter) {
    s.jitter.assign_from(jitter, nd);
    km::scale_inplace(device, static_cast<std::int64_t>(nd), s.input.data(), s.jitter.data());
  }
  s.probs.zeros(static_cast<std::size_t>(n) * E);
  matmul<T>(false, false, n, E, d, T(1), s.input.data(), wg, T(0), s.probs.data(), kRouterPrecision, device);
  s.lse.zeros(static_cast<std::size_t>(n));
  s.expert.zeros(nk);
  s.weight.zeros(nk);
  if constexpr (std::is_same_v<T, float>) {
    km::softmax_topk(device, n, E, k, s.probs.data(), s.probs.data(), s.lse.data(), s.expert.data(), s.weight.data());
  } else {
    km::softmax_topk(n, E, k, s.probs.data(), s.probs.data(), s.lse.data(), s.expert.data(), s.weight.data());
  }
  if (forced) {  // a replayed trace
    for (std::size_t a = 0; a < nk; ++a)
      SKEW_CHECK(forced[a] >= 0 && forced[a] < E, "replayed expert " << forced[a] << " outside [0, " << E << ")");
    s.forced.assign_from(forced, nk);
    km::force_choices(device, static_cast<std::int64_t>(nk), k, E, s.forced.data(), s.probs.data(), s.expert.data(),
                      s.weight.data());
  }
  // Only the control plane comes to the host: E counts and E + 1 sums.
  s.counts.resize(static_cast<std::size_t>(E));
  km::histogram(device, s.expert.data(), static_cast<std::int64_t>(nk), E, s.counts.data());
  s.local_counts = s.counts.host_copy();
  s.statistics.resize(static_cast<std::size_t>(E) + 1);
  km::gate_statistics(device, n, E, s.probs.data(), s.lse.data(), s.statistics.data());
  const std::vector<double> sums = s.statistics.host_copy();            // [sum p (E) | sum lse^2]
  std::vector<double> stats(2 * static_cast<std::size_t>(E) + 2, 0.0);  // [sum p | counts | tokens | sum lse^2]
  for (int e = 0; e < E; ++e) {
    stats[static_cast<std::size_t>(e)] = sums[static_cast<std::size_t>(e)];
    stats[static_cast<std::size_t>(E + e)] = static_cast<double>(s.local_counts[static_cast<std::size_t>(e)]);
  }
  stats[2 * static_cast<std::size_t>(E)] = n;
  stats[2 * static_cast<std::size_t>(E) + 1] = sums[static_cast<std::size_t>(E)];
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
void gate_backward(const GateOptions& opt, GateState<T>& s, const T* wg, const T* dweight, T* dx, T* dwg) {
  const int E = opt.num_experts, k = opt.top_k, n = s.n, d = s.d;
  const Device device = s.device();
  std::vector<double> aux_coef(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e)
    aux_coef[static_cast<std::size_t>(e)] = opt.aux_weight * E * s.ce[static_cast<std::size_t>(e)] / s.global_tokens;
  s.aux_coef.assign_from(aux_coef);
  s.dlogits.resize(static_cast<std::size_t>(n) * E);
  kernels::moe::gate_logit_grads(device, n, E, k, s.probs.data(), s.lse.data(), s.expert.data(), dweight,
                                 s.aux_coef.data(), opt.z_weight * 2, s.global_tokens, s.dlogits.data());
  matmul<T>(true, false, d, E, n, T(1), s.input.data(), s.dlogits.data(), T(1), dwg, kRouterPrecision, device);
  matmul<T>(false, true, n, d, E, T(1), s.dlogits.data(), wg, T(0), dx, kRouterPrecision, device);
  if (!s.jitter.empty())
    kernels::moe::scale_inplace(device, static_cast<std::int64_t>(s.jitter.size()), dx, s.jitter.data());
}

#define SKEW_MOE_GATE(T)                                                                                         \
  template void gate_forward<T>(const GateOptions&, int, int, const T*, const T*, const T*, const std::int32_t*, \
                                const SumReducer&, GateState<T>&);                                               \
  template void gate_backward<T>(const GateOptions&, GateState<T>&, const T*, const T*, T*, T*);
SKEW_MOE_GATE(float)
SKEW_MOE_GATE(double)

}  // namespace skew::moe
