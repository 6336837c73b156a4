// FasterMoE's shadowing decision on the FlexMoE cost model: the decision flips where the closed
// form of the model's terms says it must, and the measured-routing traffic agrees with the
// uniform-source all-to-all model when every rank routes equal parts.
#include <catch2/catch.hpp>

#include "lib/placement/shadowing.hpp"

using namespace skew::placement;

namespace {

// 2 ranks on 2 nodes (all-to-all at alltoall_bandwidth, the shadow exchange at allreduce_bandwidth);
// experts 0, 1 on rank 0 and 2, 3 on rank 1. Every rank routes h tokens to the hot expert 0 and
// c to each other one.
constexpr double h = 1000, c = 100;
constexpr double P = 1e6, H = 100, a = 4, g = 4;
const std::vector<std::int64_t> local = {1000, 100, 100, 100, 1000, 100, 100, 100};
const std::vector<int> owner = {0, 0, 1, 1};

CostModel model(double gemm_flops, double alltoall_bw, double allreduce_bw) {
  return CostModel({.gemm_flops = gemm_flops,
                    .nvlink_bandwidth = 1e15,
                    .alltoall_bandwidth = alltoall_bw,
                    .allreduce_bandwidth = allreduce_bw,
                    .gpus_per_node = 1,
                    .alltoall_latency = 2e-5},
                   {.params = static_cast<std::int64_t>(P),
                    .hidden_dim = static_cast<int>(H),
                    .activation_bytes = static_cast<int>(a),
                    .grad_bytes_per_param = static_cast<int>(g)});
}

}  // namespace

TEST_CASE("fastermoe shadows the hot expert exactly where the cost model's closed form flips", "[placement][shadow]") {
  // Unshadowed: rank 0 computes 2h + 2c, receives h + c tokens (the busiest link), 4 rounds.
  // Expert 0 shadowed: rank 1 computes h + 4c, rank 0 receives c and sends 2c, plus one ring
  // all-reduce of the expert's gradient over both ranks (P g bytes at the all-reduce bandwidth).
  // Shadowing pays iff (h - 2c) 6P / F + 4 (h - c) H a / B_a > P g / B_r.
  const double Ba = 1e9, Br = 1e9;
  const double sync = P * g / Br, traffic_gain = 4 * (h - c) * H * a / Ba;
  const double F_star = (h - 2 * c) * 6 * P / (sync - traffic_gain);
  const auto routing = measured_routing(local, owner, 2);
  for (double f : {0.99, 1.01}) {
    const double F = f * F_star;
    const ShadowDecision d = choose_shadows(model(F, Ba, Br), routing, ExchangeSchedule{});
    INFO("gemm_flops " << F << " against the threshold " << F_star);
    if (f < 1) {
      REQUIRE(d.shadowed == std::vector<int>{0});
      CHECK(d.seconds == Approx((h + 4 * c) * 6 * P / F + 4 * (2 * c * H * a / Ba + 2e-5) + sync).epsilon(1e-12));
      CHECK(d.balance == Approx((h + 4 * c) / ((2 * h + 6 * c) / 2)));
    } else {
      REQUIRE(d.shadowed.empty());
      CHECK(d.seconds == Approx((2 * h + 2 * c) * 6 * P / F + 4 * ((h + c) * H * a / Ba + 2e-5)).epsilon(1e-12));
    }
  }
  // The same flip in the measured all-reduce bandwidth at a fixed GEMM throughput.
  const double F = 2e12;
  const double Br_star = P * g / ((h - 2 * c) * 6 * P / F + traffic_gain);
  CHECK(choose_shadows(model(F, Ba, 1.01 * Br_star), routing, ExchangeSchedule{}).shadowed == std::vector<int>{0});
  CHECK(choose_shadows(model(F, Ba, 0.99 * Br_star), routing, ExchangeSchedule{}).shadowed.empty());
}

TEST_CASE("shadowing: measured routing in equal parts costs what the uniform model predicts", "[placement][shadow]") {
  // 4 ranks, 2 per node, 2 experts per rank; every rank routes a quarter of each count.
  const std::vector<std::int64_t> counts = {400, 80, 120, 40, 200, 160, 80, 40};
  std::vector<std::int64_t> parts;
  for (int r = 0; r < 4; ++r)
    for (auto n : counts) parts.push_back(n / 4);
  const CostModel m({.gemm_flops = 6e9,
                     .nvlink_bandwidth = 4e6,
                     .alltoall_bandwidth = 1e6,
                     .allreduce_bandwidth = 2e6,
                     .gpus_per_node = 2,
                     .alltoall_latency = 1e-4},
                    {.params = 1000, .hidden_dim = 10});
  const auto uniform = uniform_routing(counts, 4);
  const auto measured = measured_routing(parts, uniform.owner, 4);
  for (const std::vector<char>& shadowed : {std::vector<char>{0, 0, 0, 0, 0, 0, 0, 0},
                                            {1, 0, 0, 0, 0, 0, 0, 0},
                                            {1, 0, 0, 0, 1, 1, 0, 0},
                                            {1, 1, 1, 1, 1, 1, 1, 1}})
    for (int groups : {1, 4}) {
      double bu = 0, bm = 0;
      CHECK(shadowed_seconds(m, measured, shadowed, {Overlap::Pipelined, groups}, &bm) ==
            Approx(shadowed_seconds(m, uniform, shadowed, {Overlap::Pipelined, groups}, &bu)).epsilon(1e-12));
      CHECK(bm == Approx(bu));
    }
  CHECK(choose_shadows(m, uniform, ExchangeSchedule{}).shadowed ==
        choose_shadows(m, measured, ExchangeSchedule{}).shadowed);
  CHECK(choose_shadows(m, uniform_routing(counts, 1), ExchangeSchedule{})
            .shadowed.empty());  // one rank: nothing to shadow
}
