// The Swin-MoE network (float64) on 1 and 2 ranks: every parameter's gradient against central
// finite differences on odd sizes (12 x 12 images, 2 x 2 patches, 3 x 3 windows shifted by 1 with
// their mask in stage 1, one 3 x 3 window in stage 2, head width 3), and the expert-parallel
// network against the 1-rank one with the same weights under the policies that drop nothing.
#include <catch2/catch.hpp>

#include "lib/moe/models/swin_network.hpp"
#include "tests/mpi/moe_model_fixture.hpp"

using namespace skew_moe_fixture;

namespace {

ModelOptions tiny_swin(int moe_every) {
  ModelOptions o;
  o.d_model = 6, o.heads = 2, o.layers = 2, o.d_ff = 10, o.moe_every = moe_every, o.init_std = 0.3;
  o.moe.d_ff = 5;
  o.moe.gate.num_experts = 4, o.moe.gate.top_k = 2;
  o.moe.gate.aux_weight = 0.1, o.moe.gate.z_weight = 0.01;
  return o;
}

SwinShape tiny_shape() {
  SwinShape s;
  s.image = 12, s.channels = 1, s.patch = 2, s.window = 3, s.classes = 5, s.stage1_blocks = 2;
  return s;
}

// A global batch of random images and labels; rank r of N takes its contiguous share.
struct Images {
  std::vector<double> pixels;
  std::vector<std::int32_t> labels;
};
Images make_images(const SwinShape& s, int images, int rank, int ranks) {
  Rng rng(43, 2);
  const std::size_t size = static_cast<std::size_t>(s.image) * s.image * s.channels, per = images / ranks;
  Images mine;
  for (int i = 0; i < images; ++i) {
    const bool keep = static_cast<std::size_t>(i) / per == static_cast<std::size_t>(rank);
    for (std::size_t p = 0; p < size; ++p) {
      const double v = rng.normal();
      if (keep) mine.pixels.push_back(v);
    }
    const auto label = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(s.classes)));
    if (keep) mine.labels.push_back(label);
  }
  return mine;
}

double run_swin(SwinMoe<double>& m, const Images& b, bool backward) {
  StepInputs in;
  in.training = true;
  if (backward) m.zero_grads();
  const double loss = m.step(b.pixels.data(), b.labels.data(), static_cast<int>(b.labels.size()), in, backward);
  if (backward) m.sync_grads();
  return loss;
}

}  // namespace

TEST_CASE("swin-moe gradients match finite differences in every layer", "[moe][swin]") {
  for (int moe_every : {1, 2}) {
    const ModelOptions o = tiny_swin(moe_every);
    const int N = world().size();
    SwinMoe<double> m(o, tiny_shape(), world(), block_placements(o, N, 4));
    m.init(3);
    REQUIRE(m.moe().size() == static_cast<std::size_t>(moe_every == 1 ? 2 : 1));
    REQUIRE(m.moe()[0]->options().d_model == 12);  // stage 2's width
    const Images b = make_images(tiny_shape(), 4, world().rank(), N);
    check_finite_differences(m, [&](bool backward) { return run_swin(m, b, backward); });
  }
}

TEST_CASE("expert-parallel swin-moe equals the 1-rank model under the dropless policies", "[moe][swin]") {
  for (const bool deepspeed : {false, true}) {
    ModelOptions o = tiny_swin(1);
    if (deepspeed) o.moe.policy = Policy::DeepSpeed, o.moe.drop_tokens = false;  // padded to the max load
    INFO((deepspeed ? "deepspeed dropless" : "static"));
    const int N = world().size(), r = world().rank(), images = 4;
    SwinMoe<double> ref(o, tiny_shape(), self(), block_placements(o, 1, o.moe.gate.num_experts));
    SwinMoe<double> ep(o, tiny_shape(), world(), block_placements(o, N, o.moe.gate.num_experts / N));
    ref.init(5), ep.init(5);
    const double ref_loss = run_swin(ref, make_images(tiny_shape(), images, 0, 1), true);
    const double ep_loss = run_swin(ep, make_images(tiny_shape(), images, r, N), true);
    REQUIRE(ep_loss == Approx(ref_loss).epsilon(1e-12));
    REQUIRE(ep.last_correct() == ref.last_correct());
    require_same_gradients(ep, ref);
  }
}
