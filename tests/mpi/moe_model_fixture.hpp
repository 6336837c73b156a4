// Shared by the expert-parallel MoE tests (test_moe_layer.cpp, test_moe_deepspeed.cpp,
// test_moe_swin.cpp): the world and self groups, a tiny GPT-MoE, its batches, one step, and any
// network's gradients against central finite differences (float64).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.hpp"
#include "lib/moe/models/gpt_network.hpp"
#include "lib/placement/cost_model.hpp"
#include "mpi/mpi_process_group.hpp"

namespace skew_moe_fixture {
using namespace skew;
using namespace skew::moe;
using placement::LayerPlacement;

inline comm::ProcessGroup& world() {
  static comm::MpiProcessGroup group(MPI_COMM_WORLD);
  return group;
}
inline comm::ProcessGroup& self() {
  static comm::MpiProcessGroup group(MPI_COMM_SELF);
  return group;
}

inline ModelOptions tiny(int experts, int k) {
  ModelOptions o;
  o.vocab = 11, o.d_model = 8, o.heads = 2, o.layers = 2, o.seq_len = 5, o.d_ff = 12, o.moe_every = 1;
  o.init_std = 0.3;
  o.moe.d_ff = 12;
  o.moe.gate.num_experts = experts, o.moe.gate.top_k = k;
  o.moe.gate.aux_weight = 0.1, o.moe.gate.z_weight = 0.01;
  return o;
}

inline std::vector<LayerPlacement> block_placements(const ModelOptions& o, int world_size, int slots) {
  return std::vector<LayerPlacement>(static_cast<std::size_t>(o.moe_layers()),
                                     LayerPlacement::block(o.moe.gate.num_experts, world_size, slots));
}

// Global batch of `sequences` sequences; rank r of N takes its contiguous share.
struct Batch {
  std::vector<std::int32_t> tokens, targets;
};
inline Batch make_batch(const ModelOptions& o, int sequences, int rank, int ranks) {
  Batch all;
  Rng rng(42, 9);
  for (int i = 0; i < sequences * o.seq_len; ++i) {
    all.tokens.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(o.vocab))));
    all.targets.push_back(static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(o.vocab))));
  }
  const std::size_t per = all.tokens.size() / static_cast<std::size_t>(ranks);
  Batch mine;
  mine.tokens.assign(all.tokens.begin() + static_cast<long>(per * rank),
                     all.tokens.begin() + static_cast<long>(per * (rank + 1)));
  mine.targets.assign(all.targets.begin() + static_cast<long>(per * rank),
                      all.targets.begin() + static_cast<long>(per * (rank + 1)));
  return mine;
}

template <class T>
double run(GptMoe<T>& m, const Batch& b, bool backward) {
  StepInputs in;
  in.training = true;
  if (backward) m.zero_grads();
  const double loss =
      m.step(b.tokens.data(), b.targets.data(), static_cast<int>(b.tokens.size()) / m.options().seq_len, in, backward);
  if (backward) m.sync_grads();
  return loss;
}

// The float network `from`'s weights (dense and this rank's experts) into `to`, of any element
// type: models built alike then differ only in their arithmetic.
template <class T>
void copy_weights(MoeNetwork<float>& from, MoeNetwork<T>& to) {
  std::copy(from.dense_w().begin(), from.dense_w().end(), to.dense_w().begin());
  for (std::size_t l = 0; l < from.moe().size(); ++l)
    for (auto& [e, s] : from.moe()[l]->experts()) {
      const float* src = s.w.template data<float>();
      std::copy(src, src + s.w.numel(), to.moe()[l]->experts().at(e).w.template data<T>());
    }
}

// Relative 2-norm distance between the gradients (dense and this rank's experts) of two networks
// (collective).
template <class A, class B>
double gradient_distance(MoeNetwork<A>& a, MoeNetwork<B>& b) {
  std::vector<double> sums = {0, 0};  // squared difference, squared reference
  auto add = [&](const auto& x, const auto& y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
      sums[0] += d * d, sums[1] += static_cast<double>(y[i]) * static_cast<double>(y[i]);
    }
  };
  if (world().rank() == 0) add(a.dense_g(), b.dense_g(), b.dense_g().size());  // identical on every rank
  for (std::size_t l = 0; l < b.moe().size(); ++l)
    for (auto& [e, s] : b.moe()[l]->experts()) add(a.moe()[l]->experts().at(e).g, s.g, s.g.size());
  world().allreduce(comm::view(sums), comm::ReduceOp::Sum);
  return std::sqrt(sums[0] / sums[1]);
}

// Every dense parameter segment (first, middle, last element) and a few parameters of every
// expert this rank holds: the analytic gradient of one step against central differences.
// `run_step(backward)`: the model's loss on its batch, with gradients (zeroed, then synced) when
// `backward`; any family's network (GPT here, Swin in test_moe_swin.cpp).
inline void check_finite_differences(MoeNetwork<double>& m, const std::function<double(bool)>& run_step) {
  const ModelOptions& o = m.options();
  run_step(true);
  const double eps = 1e-6;
  auto fd = [&](double* w) {
    const double keep = w ? *w : 0;
    if (w) *w = keep + eps;
    const double up = run_step(false);
    if (w) *w = keep - eps;
    const double down = run_step(false);
    if (w) *w = keep;
    return (up - down) / (2 * eps);
  };
  for (const auto& seg : m.segments())
    for (std::size_t i : {std::size_t{0}, seg.size / 2, seg.size - 1}) {
      const double analytic = m.dense_g()[seg.offset + i];
      INFO(seg.name << "[" << i << "]");
      REQUIRE(fd(&m.dense_w()[seg.offset + i]) == Approx(analytic).margin(1e-7).epsilon(1e-5));
    }
  for (auto& layer : m.moe()) {
    const std::size_t D = static_cast<std::size_t>(layer->options().d_model),
                      F = static_cast<std::size_t>(layer->options().d_ff);
    for (int e = 0; e < o.moe.gate.num_experts; ++e)
      for (std::size_t i : {std::size_t{1}, D * F + 3, D * F + F + 5, 2 * D * F + F + 2}) {
        auto it = layer->experts().find(e);
        const bool mine = it != layer->experts().end();
        // Every rank takes part in the collective steps, holding the expert or not.
        const double numeric = fd(mine ? &it->second.w.data<double>()[i] : nullptr);
        INFO("expert " << e << "[" << i << "]");
        if (mine) REQUIRE(numeric == Approx(it->second.g[i]).margin(1e-7).epsilon(1e-5));
      }
  }
}

inline void check_finite_differences(GptMoe<double>& m, const Batch& b) {
  check_finite_differences(m, [&](bool backward) { return run(m, b, backward); });
}

// Compute dominates (1 kFLOP/s against 1 TB/s links): a cost model under which fastermoe shadows
// the hot experts of `o`.
inline placement::CostModel compute_bound_cost_model(const ModelOptions& o) {
  return placement::CostModel({.gemm_flops = 1e3,
                               .nvlink_bandwidth = 1e12,
                               .alltoall_bandwidth = 1e12,
                               .allreduce_bandwidth = 1e12,
                               .gpus_per_node = 8,
                               .alltoall_latency = 0},
                              {.params = o.moe.expert_params(), .hidden_dim = o.d_model});
}

// The expert-parallel network's gradients equal the single-rank reference's: every dense
// gradient, and every expert this rank holds against the same expert on the reference.
inline void require_same_gradients(MoeNetwork<double>& ep, MoeNetwork<double>& ref) {
  for (std::size_t i = 0; i < ref.dense_g().size(); ++i)
    REQUIRE(ep.dense_g()[i] == Approx(ref.dense_g()[i]).margin(1e-12).epsilon(1e-9));
  for (std::size_t l = 0; l < ep.moe().size(); ++l)
    for (auto& [e, s] : ep.moe()[l]->experts()) {
      const auto& want = ref.moe()[l]->experts().at(e).g;
      for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(s.g[i] == Approx(want[i]).margin(1e-12).epsilon(1e-9));
    }
}

}  // namespace skew_moe_fixture
