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

namespace skew::moe {

struct GateOptions {
  int num_experts = 4;
  int top_k = 1;
  double aux_weight = 0.01;
  double z_weight = 0.0;
};

template <class T>
struct GateState {
  int n = 0, d = 0;
  std::vector<std::int32_t> expert;         // [n * k] chosen expert per assignment (token-major)
  std::vector<T> weight;                    // [n * k] its gate probability
  std::vector<T> input;                     // [n * d] gate input after jitter
  std::vector<T> jitter;                    // [n * d] multiplicative noise, empty when off
  std::vector<T> probs;                     // [n * E]
  std::vector<T> lse;                       // [n] logsumexp of the logits
  std::vector<double> ce;                   // [E] global fraction of assignments per expert
  std::vector<std::int64_t> local_counts;   // [E] this rank's assignments per expert
  std::vector<std::int64_t> global_counts;  // [E] all ranks' assignments per expert
  double global_tokens = 0;
  double aux_loss = 0, z_loss = 0;  // weighted, global
};

// Sums a vector over all ranks in place (identity on one rank).
using SumReducer = std::function<void(std::vector<double>&)>;

// `jitter` (n*d multiplicative factors) or `forced` (n*k expert ids, a replayed trace) may be null.
template <class T>
void gate_forward(const GateOptions& opt, int n, int d, const T* x, const T* wg, const T* jitter,
                  const std::int32_t* forced, const SumReducer& reduce, GateState<T>& s);
// dweight: [n*k] loss gradient w.r.t. the chosen weights. Writes dx (n*d), accumulates dwg.
template <class T>
void gate_backward(const GateOptions& opt, const GateState<T>& s, const T* wg, const T* dweight, T* dx, T* dwg);

}  // namespace skew::moe
