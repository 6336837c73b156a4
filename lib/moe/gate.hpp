// Top-k softmax gate of an MoE layer: logits = x Wg, probs = softmax(logits), each token picks
// its k most probable experts (ties to the lower id) and weighs the expert's output by that
// probability. Auxiliary losses (global over all ranks' tokens, so N ranks compute exactly the
// one-rank model): GShard/Switch balance loss  aux_weight * E * sum_e me[e] * ce[e]  (me = mean
// probability, ce = fraction of the N*k assignments), and z-loss  z_weight * mean(lse^2).
// Optional jitter multiplies the gate input by U(1 - jitter, 1 + jitter) while training.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/device_array.hpp"

namespace skew::moe {

struct GateOptions {
  int num_experts = 4;
  int top_k = 1;
  double aux_weight = 0.01;
  double z_weight = 0.0;
};

// The per-token arrays live on the gate's device (the MoE layer's MoeOptions::device); the
// per-expert totals and the losses, the control plane, on the host.
template <class T>
struct GateState {
  explicit GateState(Device device = Device::Host)
      : expert(device),
        weight(device),
        input(device),
        jitter(device),
        probs(device),
        lse(device),
        statistics(device),
        counts(device),
        forced(device),
        dlogits(device),
        aux_coef(device) {}
  Device device() const { return probs.device(); }
  int n = 0, d = 0;
  DeviceArray<std::int32_t> expert;         // [n * k] chosen expert per assignment (token-major)
  DeviceArray<T> weight;                    // [n * k] its gate probability
  DeviceArray<T> input;                     // [n * d] gate input after jitter
  DeviceArray<T> jitter;                    // [n * d] multiplicative noise, empty when off
  DeviceArray<T> probs;                     // [n * E]
  DeviceArray<T> lse;                       // [n] logsumexp of the logits
  std::vector<double> ce;                   // [E] global fraction of assignments per expert
  std::vector<std::int64_t> local_counts;   // [E] this rank's assignments per expert
  std::vector<std::int64_t> global_counts;  // [E] all ranks' assignments per expert
  double global_tokens = 0;
  double aux_loss = 0, z_loss = 0;  // weighted, global
  // Scratch on the device: the statistics and counts before they come to the host, a replayed
  // trace, the logit gradient and the balance loss's per-expert coefficients.
  DeviceArray<double> statistics;
  DeviceArray<std::int64_t> counts;
  DeviceArray<std::int32_t> forced;
  DeviceArray<T> dlogits;
  DeviceArray<double> aux_coef;
};

// Sums a vector over all ranks in place (identity on one rank).
using SumReducer = std::function<void(std::vector<double>&)>;

// x, wg, jitter, dweight, dx and dwg on s.device(). `jitter` (n*d multiplicative factors) or
// `forced` (n*k expert ids on the host, a replayed trace) may be null.
template <class T>
void gate_forward(const GateOptions& opt, int n, int d, const T* x, const T* wg, const T* jitter,
                  const std::int32_t* forced, const SumReducer& reduce, GateState<T>& s);
// dweight: [n*k] loss gradient w.r.t. the chosen weights. Writes dx (n*d), accumulates dwg; `s`
// lends its scratch.
template <class T>
void gate_backward(const GateOptions& opt, GateState<T>& s, const T* wg, const T* dweight, T* dx, T* dwg);

}  // namespace skew::moe
