#include "lib/moe/optimizer.hpp"

#include <cmath>
#include <numbers>

namespace skew::moe {

double learning_rate(const AdamWOptions& opt, std::int64_t step) {
  if (step < opt.warmup) return opt.lr * static_cast<double>(step + 1) / static_cast<double>(opt.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - opt.warmup) /
                                            static_cast<double>(std::max<std::int64_t>(1, opt.total - opt.warmup)));
  const double floor = opt.lr * opt.min_lr_ratio;
  return floor + 0.5 * (opt.lr - floor) * (1 + std::cos(std::numbers::pi * progress));
}

AdamW::AdamW(const AdamWOptions& opt, GptMoe<float>& model, comm::ProcessGroup& world)
    : opt_(opt),
      model_(model),
      world_(world),
      m_(model.dense_w().size(), 0.f),
      v_(model.dense_w().size(), 0.f),
      decay_(model.dense_w().size(), 0) {
  for (const auto& s : model.segments()) {
    const bool matrix = s.name == "wte" || s.name == "wpe" || s.name.ends_with(".w") || s.name.ends_with("w_qkv") ||
                        s.name.ends_with("w_o") || s.name.ends_with("w1") || s.name.ends_with("w2");
    std::fill(decay_.begin() + static_cast<long>(s.offset), decay_.begin() + static_cast<long>(s.offset + s.size),
              matrix ? 1 : 0);
  }
}

namespace {
// In fp32, as PyTorch's AdamW, so that the loop vectorises (it was a double loop with a libm
// sqrt per element: 5-8% of a CPU step, more for flexmoe, whose replicas each carry the state).
struct AdamWStep {
  float scale, lr, beta1, beta2, eps, decay, inv_c1, inv_sqrt_c2;
};
void adamw_update(float* w, const float* g, float* m, float* v, std::size_t begin, std::size_t end, bool decay,
                  AdamWStep k) {
  const float weight_decay = decay ? k.decay : 0.0f;
  for (std::size_t i = begin; i < end; ++i) {
    const float gi = g[i] * k.scale;
    m[i] = k.beta1 * m[i] + (1.0f - k.beta1) * gi;
    v[i] = k.beta2 * v[i] + (1.0f - k.beta2) * gi * gi;
    const float update = (m[i] * k.inv_c1) / (std::sqrt(v[i]) * k.inv_sqrt_c2 + k.eps) + weight_decay * w[i];
    w[i] -= k.lr * update;
  }
}
}  // namespace

double AdamW::step(std::int64_t iteration) {
  // Global norm: dense gradients are identical everywhere; each expert counts once, from the
  // replica on its lowest rank.
  double dense = 0;
  for (float g : model_.dense_g()) dense += static_cast<double>(g) * g;
  std::vector<double> expert = {0.0};
  for (auto& layer : model_.moe())
    for (auto& [e, s] : layer->experts())
      if (layer->placement().experts[static_cast<std::size_t>(e)].front().rank == world_.rank())
        for (float g : s.g) expert[0] += static_cast<double>(g) * g;
  world_.allreduce(comm::view(expert), comm::ReduceOp::Sum);
  const double norm = std::sqrt(dense + expert[0]);
  const double c1 = 1 - std::pow(opt_.beta1, static_cast<double>(iteration + 1));
  const double c2 = 1 - std::pow(opt_.beta2, static_cast<double>(iteration + 1));
  const AdamWStep k{(opt_.grad_clip > 0 && norm > opt_.grad_clip) ? static_cast<float>(opt_.grad_clip / norm) : 1.f,
                    static_cast<float>(learning_rate(opt_, iteration)),
                    static_cast<float>(opt_.beta1),
                    static_cast<float>(opt_.beta2),
                    static_cast<float>(opt_.eps),
                    static_cast<float>(opt_.weight_decay),
                    static_cast<float>(1.0 / c1),
                    static_cast<float>(1.0 / std::sqrt(c2))};
  auto& w = model_.dense_w();
  for (const auto& s : model_.segments())
    adamw_update(w.data(), model_.dense_g().data(), m_.data(), v_.data(), s.offset, s.offset + s.size, decay_[s.offset],
                 k);
  const std::size_t D = static_cast<std::size_t>(model_.options().d_model),
                    F = static_cast<std::size_t>(model_.options().moe.d_ff);
  for (auto& layer : model_.moe())
    for (auto& [e, s] : layer->experts()) {
      float *pw = s.w.data<float>(), *pm = s.m.data<float>(), *pv = s.v.data<float>();
      // Layout [W1 | b1 | W2 | b2]: decay the two matrices only.
      adamw_update(pw, s.g.data(), pm, pv, 0, D * F, true, k);
      adamw_update(pw, s.g.data(), pm, pv, D * F, D * F + F, false, k);
      adamw_update(pw, s.g.data(), pm, pv, D * F + F, 2 * D * F + F, true, k);
      adamw_update(pw, s.g.data(), pm, pv, 2 * D * F + F, 2 * D * F + F + D, false, k);
    }
  return norm;
}

}  // namespace skew::moe
