#include "lib/moe/optimizer.hpp"

#include <cmath>
#include <numbers>

#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_rowwise.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

double learning_rate(const AdamWOptions& opt, std::int64_t step) {
  if (step < opt.warmup) return opt.lr * static_cast<double>(step + 1) / static_cast<double>(opt.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - opt.warmup) /
                                            static_cast<double>(std::max<std::int64_t>(1, opt.total - opt.warmup)));
  const double floor = opt.lr * opt.min_lr_ratio;
  return floor + 0.5 * (opt.lr - floor) * (1 + std::cos(std::numbers::pi * progress));
}

AdamW::AdamW(const AdamWOptions& opt, MoeNetwork<float>& model, comm::ProcessGroup& world)
    : opt_(opt), model_(model), world_(world), m_(model.device()), v_(model.device()) {
  m_.resize(model.dense_w().size()), v_.resize(model.dense_w().size());
  for (const auto& s : model.segments()) {
    const bool matrix = s.name == "wte" || s.name == "wpe" || s.name.ends_with(".w") || s.name.ends_with("w_qkv") ||
                        s.name.ends_with("w_o") || s.name.ends_with("w1") || s.name.ends_with("w2");
    decay_.push_back(matrix ? 1 : 0);
  }
}

double AdamW::step(std::int64_t iteration) {
  // Global norm: dense gradients are identical everywhere; each expert counts once, from the
  // replica on its lowest rank. Each sum of squares runs where its gradients are; one scalar
  // comes back from each.
  const Device device = model_.device();
  const double dense = sum_of_squares(model_.dense_g().size(), model_.dense_g().data(), device);
  std::vector<double> expert = {0.0};
  for (auto& layer : model_.moe())
    for (auto& [e, s] : layer->experts())
      if (layer->placement().experts[static_cast<std::size_t>(e)].front().rank == world_.rank())
        expert[0] += sum_of_squares(s.g.size(), s.g.data(), s.g.device());
  world_.allreduce(comm::view(expert), comm::ReduceOp::Sum);
  const double norm = std::sqrt(dense + expert[0]);
  const double c1 = 1 - std::pow(opt_.beta1, static_cast<double>(iteration + 1));
  const double c2 = 1 - std::pow(opt_.beta2, static_cast<double>(iteration + 1));
  const kernels::moe::AdamWStep k{kernels::moe::grad_clip_scale(norm, opt_.grad_clip),
                                  static_cast<float>(learning_rate(opt_, iteration)),
                                  static_cast<float>(opt_.beta1),
                                  static_cast<float>(opt_.beta2),
                                  static_cast<float>(opt_.eps),
                                  static_cast<float>(opt_.weight_decay),
                                  static_cast<float>(1.0 / c1),
                                  static_cast<float>(1.0 / std::sqrt(c2))};
  auto& w = model_.dense_w();
  const auto& segments = model_.segments();
  for (std::size_t i = 0; i < segments.size(); ++i)
    kernels::moe::adamw_update(device, w.data(), model_.dense_g().data(), m_.data(), v_.data(), segments[i].offset,
                               segments[i].offset + segments[i].size, decay_[i], k);
  for (auto& layer : model_.moe()) {
    // The layer's own widths: Swin's MoE layers are as wide as their stage, not the embedding.
    const std::size_t D = static_cast<std::size_t>(layer->options().d_model),
                      F = static_cast<std::size_t>(layer->options().d_ff);
    const Device expert_device = layer->options().device;  // where the layer keeps w, m, v and g
    for (auto& [e, s] : layer->experts()) {
      float *pw = s.w.data<float>(), *pm = s.m.data<float>(), *pv = s.v.data<float>();
      const float* pg = s.g.data();  // the lambda captures plain names: clang refuses structured bindings
      const auto update = [&](std::size_t begin, std::size_t end, bool decay) {
        kernels::moe::adamw_update(expert_device, pw, pg, pm, pv, begin, end, decay, k);
      };
      // Layout [W1 | b1 | W2 | b2]: decay the two matrices only.
      update(0, D * F, true);
      update(D * F, D * F + F, false);
      update(D * F + F, 2 * D * F + F, true);
      update(2 * D * F + F, 2 * D * F + F + D, false);
    }
  }
  return norm;
}

}  // namespace skew::moe
