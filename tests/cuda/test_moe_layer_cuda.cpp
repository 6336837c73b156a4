// The MoE layer with MoeOptions::device = Cuda against the same layer on the host, at one rank
// (MPI_COMM_SELF), on odd shapes (37 tokens, d_model 37, d_ff 53, 5 experts, top-2, jitter on):
// the chosen experts, the losses, y, and the backward's dx, dwg and every expert's gradients, at
// fp32 tolerances and, with bf16 expert GEMMs, bf16 ones; under the static policy and under
// deepspeed dropping tokens; with FasterMoE's smart schedule (3 chunks at one rank); after a
// replica moves in (flexmoe's executor). Every case skips without a GPU. The host run is the reference:
// tests/mpi/test_moe_layer.cpp checks it against float64 and finite differences.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <vector>

#include "core/rng.hpp"
#include "lib/moe/moe_layer.hpp"
#include "mpi/mpi_process_group.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
using namespace skew::moe;

namespace {

constexpr int kTokens = 37, kWidth = 37, kHidden = 53, kExperts = 5;

comm::ProcessGroup& self() {
  static comm::MpiProcessGroup group(MPI_COMM_SELF);
  return group;
}

MoeOptions options(Policy policy, Precision precision) {
  MoeOptions o;
  o.d_model = kWidth, o.d_ff = kHidden;
  o.gate.num_experts = kExperts, o.gate.top_k = 2;
  o.gate.aux_weight = 0.1, o.gate.z_weight = 0.01;
  o.policy = policy, o.precision = precision;
  o.capacity_factor_train = 0.7;  // deepspeed: a capacity below the busiest experts' load
  o.min_capacity = 2;
  return o;
}

std::vector<float> uniform(std::size_t n, std::uint64_t stream, float lo, float hi) {
  Rng rng(31, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * static_cast<float>(rng.uniform());
  return v;
}

std::vector<float> on_host(const Tensor& t) {
  const Tensor h = t.to(Device::Host);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

struct Run {
  std::vector<std::int32_t> expert;
  double aux = 0, z = 0;
  std::int64_t dropped = 0;
  std::vector<float> y, dx, dwg;
  std::map<int, std::vector<float>> expert_grads;
};

// Drops expert `e`'s replica and creates it again with the same weights, as flexmoe's executor
// does when a replica moves here (create, then receive w, m, v into it).
void move_replica(MoeLayer<float>& layer, int e) {
  const Tensor weights = layer.experts().at(e).w.to(Device::Host);
  layer.experts().erase(e);
  layer.create_expert(e).w.copy_from(weights);
}

// One forward and backward with every input on `device`; with `moved_expert` >= 0, after a first
// forward (which rounds the bf16 weight copies), that expert's replica moves in again first.
Run run_layer(MoeOptions o, Device device, int moved_expert = -1) {
  o.device = device;
  MoeLayer<float> layer(o, self(), placement::LayerPlacement::block(kExperts, 1, kExperts));
  layer.init_experts(7, 0, 0.3);
  const auto put = [&](const std::vector<float>& v) {
    return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(device);
  };
  Tensor x = put(uniform(std::size_t(kTokens) * kWidth, 1, -1.0f, 1.0f));
  Tensor wg = put(uniform(std::size_t(kWidth) * kExperts, 2, -1.5f, 1.5f));
  Tensor jitter = put(uniform(std::size_t(kTokens) * kWidth, 3, 0.9f, 1.1f));
  Tensor dy = put(uniform(std::size_t(kTokens) * kWidth, 4, -1.0f, 1.0f));
  Tensor y = Tensor::zeros({kTokens * kWidth}, DType::F32, device);
  Tensor dx = Tensor::zeros({kTokens * kWidth}, DType::F32, device);
  Tensor dwg = Tensor::zeros({kWidth * kExperts}, DType::F32, device);
  StepContext ctx;
  ctx.jitter = jitter.data<float>();
  if (moved_expert >= 0) {
    layer.forward(kTokens, x.data<float>(), wg.data<float>(), ctx, y.data<float>());
    move_replica(layer, moved_expert);
  }
  layer.forward(kTokens, x.data<float>(), wg.data<float>(), ctx, y.data<float>());
  layer.backward(dy.data<float>(), wg.data<float>(), dx.data<float>(), dwg.data<float>());
  Run r;
  r.expert = layer.gate_state().expert.host_copy();
  r.aux = layer.gate_state().aux_loss, r.z = layer.gate_state().z_loss;
  r.dropped = layer.dropped();
  r.y = on_host(y), r.dx = on_host(dx), r.dwg = on_host(dwg);
  for (auto& [e, s] : layer.experts()) r.expert_grads[e] = s.g.host_copy();
  return r;
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs,
                   const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= abs + rel * std::fabs(double(want[i])))) ++bad;
  INFO(what << ": " << bad << " of " << got.size() << " elements outside tolerance");
  CHECK(bad == 0);
}

void require_same_run(const Run& gpu, const Run& host, double rel, double abs) {
  REQUIRE(gpu.expert == host.expert);
  CHECK(gpu.dropped == host.dropped);
  CHECK(gpu.aux == Approx(host.aux).epsilon(1e-5));
  CHECK(gpu.z == Approx(host.z).epsilon(1e-5));
  require_close(gpu.y, host.y, rel, abs, "y");
  require_close(gpu.dx, host.dx, rel, abs, "dx");
  require_close(gpu.dwg, host.dwg, rel, abs, "dwg");
  REQUIRE(gpu.expert_grads.size() == host.expert_grads.size());
  for (const auto& [e, g] : host.expert_grads) require_close(gpu.expert_grads.at(e), g, rel, abs, "expert gradient");
}

}  // namespace

TEST_CASE("MoE layer on CUDA equals the host layer (static, fp32)", "[moe][cuda][layer]") {
  SKEW_REQUIRE_GPU();
  const MoeOptions o = options(Policy::Static, Precision::Fp32);
  require_same_run(run_layer(o, Device::Cuda), run_layer(o, Device::Host), 1e-4, 1e-5);
}

TEST_CASE("MoE layer on CUDA equals the host layer (static, bf16 expert GEMMs)", "[moe][cuda][layer]") {
  SKEW_REQUIRE_GPU();
  const MoeOptions o = options(Policy::Static, Precision::Bf16);
  require_same_run(run_layer(o, Device::Cuda), run_layer(o, Device::Host), 2e-2, 2e-3);
}

TEST_CASE("MoE layer on CUDA equals the host layer (deepspeed dropping tokens)", "[moe][cuda][layer]") {
  SKEW_REQUIRE_GPU();
  const MoeOptions o = options(Policy::DeepSpeed, Precision::Fp32);
  const Run host = run_layer(o, Device::Host);
  REQUIRE(host.dropped > 0);
  require_same_run(run_layer(o, Device::Cuda), host, 1e-4, 1e-5);
}

// FasterMoE's smart schedule at one rank: the rank's own rows in 3 chunks, each chunk's experts
// called on device pointers into the expert-contiguous buffers, the stage copies on the device.
TEST_CASE("MoE layer on CUDA equals the host layer (smart schedule, 3 chunks)", "[moe][cuda][layer]") {
  SKEW_REQUIRE_GPU();
  MoeOptions o = options(Policy::Static, Precision::Fp32);
  o.schedule_chunks = 3;
  require_same_run(run_layer(o, Device::Cuda), run_layer(o, Device::Host), 1e-4, 1e-5);
  o.precision = Precision::Bf16;
  require_same_run(run_layer(o, Device::Cuda), run_layer(o, Device::Host), 2e-2, 2e-3);
}

// A replica moving in (flexmoe's executor: create, then copy the weights in) leaves no stale bf16
// copy on the device: the next forward rounds the moved expert's weights again.
TEST_CASE("MoE layer on CUDA equals the host layer after a replica moves in (bf16)", "[moe][cuda][layer]") {
  SKEW_REQUIRE_GPU();
  const MoeOptions o = options(Policy::Static, Precision::Bf16);
  require_same_run(run_layer(o, Device::Cuda, 2), run_layer(o, Device::Host, 2), 2e-2, 2e-3);
}
