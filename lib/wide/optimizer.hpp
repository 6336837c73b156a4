// Sparse optimisers for wide models: only the bias and the rows of the features a batch touched
// are updated (lazy L2 on those rows), with per-coordinate state for AdaGrad and FTRL-proximal.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/zero_pages.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_model.hpp"
#include "kernels/wide_pool.hpp"
#include "kernels/wide_update.hpp"

namespace skew::wide {

using OptimizerKind = kernels::WideOptimizerKind;
OptimizerKind optimizer_from_name(const std::string& name);  // sgd | adagrad | ftrl
const char* optimizer_name(OptimizerKind kind);

// The per-coordinate rule the kernels apply (AdaGrad's initial accumulator, eps, included).
using OptimizerOptions = kernels::WideUpdateRule;

// AdaGrad's eps (its accumulator's start for the gradient a step applies) from `init`, the start
// on the scale of one sample's squared gradient, for steps on the average of `samples_per_step`
// samples' gradients: init / B^2, so that a step lr g_avg / sqrt(eps + g_avg^2) is per-sample
// AdaGrad's lr g_sum / sqrt(init + g_sum^2) on the batch's summed gradient (train.adagrad_init).
float adagrad_eps(double init, std::int64_t samples_per_step);

class Optimizer {
 public:
  // `params` is the starting point (FTRL derives its z state from it).
  Optimizer(const OptimizerOptions& options, const kernels::WideShape& shape, std::span<const float> params);
  // params -= update(grad * scale) on the bias and the rows of `features`; zeroes those grads.
  void step(float* params, float* grad, const std::vector<std::uint32_t>& features, float scale,
            kernels::WidePool& pool);
  // The same update from a gradient in feature-row form (the flow schema's output); the parts
  // are applied in parallel, each row with its partial rows folded in, and the rows zeroed.
  void step(float* params, kernels::WideSparseGradient& grad, float scale, kernels::WidePool& pool);
  // The same update, for a flow kernel that applies it to the rows itself (WideFlow::fuses_update);
  // step_bias then applies the bias's gradient (and zeroes it).
  kernels::WideFusedUpdate fused_update(float* params, float scale);
  void step_bias(float* params, float& bias_grad, float scale);
  const OptimizerOptions& options() const { return options_; }
  const kernels::WideUpdateRule& rule() const { return options_; }
  // The per-coordinate state (AdaGrad: n; FTRL: n and z; empty when the rule has none), for a
  // CUDA trainer that starts from the same state. AdaGrad's n holds 0 for eps where no step has
  // written it yet (the rule reads it so); saved_n_state() writes eps there, as a checkpoint
  // stores it.
  std::span<const float> n_state() const { return n_; }
  std::span<const float> z_state() const { return z_; }
  std::vector<float> saved_n_state() const;
  // The same state as writable arrays, for a kernel that updates the model itself (Hogwild).
  kernels::WideOptimizerState state() { return {n_.empty() ? nullptr : n_.data(), z_.empty() ? nullptr : z_.data()}; }
  // Replaces the state (a resumed run's): each vector as long as the one it replaces.
  void set_state(std::vector<float> n, std::vector<float> z);

 private:
  // Updates params[offset, offset + count) from g[0, count) and zeroes g.
  void update(const kernels::WideUpdateRule& r, float* params, float* g, std::size_t offset, std::size_t count,
              float scale);
  OptimizerOptions options_;
  kernels::WideShape shape_;
  // AdaGrad: n_ = eps + sum g^2, 0 (standing for eps) until a step writes it, except the bias's,
  // which starts at eps (Hogwild's per-thread bias copies add their moves of it). FTRL: n_ =
  // sum g^2 and z_, both zero where a parameter starts at zero (all of n_, LR's z_). On zero
  // pages, so only the pages of rows that a step updates (or a non-zero parameter initialises)
  // are ever written.
  ZeroPageVector<float> n_, z_;
};

}  // namespace skew::wide
