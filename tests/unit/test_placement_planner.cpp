// Planner on constructed loads, load monitor, and the FlexMoE policy's trigger and change log.
#include <catch2/catch.hpp>

#include "core/rng.hpp"
#include "lib/placement/flexmoe.hpp"

using namespace skew::placement;

namespace {

// Fast links so that compute dominates: 1 ms per token, state moves in microseconds.
CostModel compute_bound_model(double bandwidth = 1e12, int state_bytes_per_param = 12) {
  CostConstants c;
  c.gemm_flops = 6e6;
  c.nvlink_bandwidth = c.alltoall_bandwidth = c.allreduce_bandwidth = bandwidth;
  c.gpus_per_node = 4;
  ExpertShape s;
  s.params = 1000;
  s.hidden_dim = 10;
  s.state_bytes_per_param = state_bytes_per_param;
  return CostModel(c, s);
}

}  // namespace

TEST_CASE("planner: a hot expert gets replicas until the ranks are balanced", "[placement][planner]") {
  const CostModel m = compute_bound_model();
  const auto current = LayerPlacement::block(4, 4, 2);
  const std::vector<double> load{1000, 100, 100, 100};
  PlannerOptions o;
  o.noise_z = 0;  // exact loads, no sampling noise
  const LayerPlan plan = plan_layer(m, current, load, o);
  plan.placement.validate();
  CHECK(plan.placement.experts[0].size() == 4);
  const auto loads = m.rank_loads(plan.placement, load);
  CHECK(balance_ratio(loads) == Approx(1.0).epsilon(1e-6));  // water-filled: 325 tokens each
  CHECK(plan.predicted_after < plan.predicted_before / 3);
  REQUIRE(!plan.changes.empty());
  CHECK(plan.changes.front().op == "expand");
  CHECK(plan.changes.front().expert == 0);
  CHECK(plan.changes.front().predicted_gain > 0);
}

TEST_CASE("planner: a hot expert stops expanding when the slots run out", "[placement][planner]") {
  const CostModel m = compute_bound_model();
  // 8 experts on 4 ranks with 3 slots: one free slot per rank, even shares.
  const auto current = LayerPlacement::block(8, 4, 3);
  std::vector<double> load(8, 100.0);
  load[0] = 10000;
  PlannerOptions o;
  o.noise_z = 0;  // exact loads, no sampling noise
  o.balanced_shares = false;
  const LayerPlan plan = plan_layer(m, current, load, o);
  plan.placement.validate();
  CHECK(plan.placement.experts[0].size() == 4);  // one replica on every rank: nowhere else to go
  for (const auto& r : plan.placement.experts[0]) CHECK(r.share == Approx(0.25));
  CHECK(plan.predicted_after < plan.predicted_before);
}

TEST_CASE("planner: hedging fills free slots with the hottest experts only while cheap", "[placement][planner]") {
  // 4 experts on 2 ranks with 3 slots each: the loads are already balanced, so the greedy search
  // changes nothing; hedging puts the hottest expert of each rank on the other one.
  const CostModel m = compute_bound_model();
  const auto current = LayerPlacement::block(4, 2, 3);
  const std::vector<double> load{400, 100, 300, 200};
  PlannerOptions o;
  o.hedge = 0.02;
  CHECK(plan_layer(m, current, load, o).changes.empty());  // the paper variant never hedges
  o.variant = PlannerVariant::Hedge;
  const LayerPlan plan = plan_layer(m, current, load, o);
  REQUIRE(plan.changes.size() == 2);
  CHECK(plan.changes[0].op == "hedge");
  CHECK(plan.changes[0].expert == 0);  // hottest, to rank 1
  CHECK(plan.changes[0].to_rank == 1);
  CHECK(plan.changes[1].expert == 2);  // then rank 0's free slot takes the hottest of rank 1's
  CHECK(plan.changes[1].to_rank == 0);
  CHECK(plan.placement.replicas_on(0) == 3);
  CHECK(plan.placement.replicas_on(1) == 3);
  // A slow all-reduce (one rank a node, 4000 gradient bytes at 1000 B/s: 4 s against a 0.5 s
  // step) makes every hedge replica too dear: none is added.
  CostConstants c = m.constants();
  c.gpus_per_node = 1;
  c.allreduce_bandwidth = 1000;
  CHECK(plan_layer(CostModel(c, m.shape()), current, load, o).changes.empty());
}

TEST_CASE("planner: a change whose gain is below its amortised cost is not taken", "[placement][planner]") {
  // Moving a replica carries 2e12 state bytes at 1e11 B/s = 20 s; the gain is about 0.15 s
  // per iteration (compute of the hot rank), so 50 iterations (7.5 s) never pay for it.
  const CostModel slow = compute_bound_model(1e11, 2'000'000'000);
  const auto current = LayerPlacement::block(4, 4, 2);
  const std::vector<double> load{300, 100, 100, 100};
  PlannerOptions o;
  o.noise_z = 0;  // exact loads: only the move's cost holds it back
  o.interval = 50;
  const LayerPlan plan = plan_layer(slow, current, load, o);
  CHECK(plan.changes.empty());
  CHECK(plan.placement == current);
  CHECK(plan.change_seconds == 0.0);
  // The same loads over a horizon long enough to amortise it: the planner expands.
  o.interval = 1000000;
  CHECK(!plan_layer(slow, current, load, o).changes.empty());
}

TEST_CASE("planner: every plan on random loads validates and never predicts a slower step", "[placement][planner]") {
  skew::Rng rng(42, 0);
  for (int trial = 0; trial < 40; ++trial) {
    const int ranks = 1 << static_cast<int>(rng.below(4));  // 1..8
    const int per_rank = 1 + static_cast<int>(rng.below(3));
    const int slots = per_rank + static_cast<int>(rng.below(3));
    const CostModel m = compute_bound_model(trial % 2 ? 1e12 : 1e6);
    const auto current = LayerPlacement::block(ranks * per_rank, ranks, slots);
    std::vector<double> load(static_cast<std::size_t>(ranks * per_rank));
    for (auto& l : load) l = std::floor(1000 * std::pow(rng.uniform(), 3.0f));
    PlannerOptions o;
    o.balanced_shares = trial % 3 != 0;
    const LayerPlan plan = plan_layer(m, current, load, o);
    CHECK_NOTHROW(plan.placement.validate());
    CHECK(plan.predicted_after <= plan.predicted_before * (1 + 1e-12));
    // A second plan from the result starts from its own placement and also validates.
    CHECK_NOTHROW(plan_layer(m, plan.placement, load, o).placement.validate());
  }
}

TEST_CASE("assign_shares: a load lost to rounding goes whole to the least loaded replica", "[placement][planner]") {
  // Expert 2 (replicas on ranks 0 and 1) carries 1e-20 tokens, a smoothed estimate decaying to
  // zero: 1000 + 1e-20 == 1000 in doubles, so water filling raises neither rank. Rank 1 (500
  // tokens of expert 1) is below rank 0 (1000 of expert 0): it takes all of expert 2.
  LayerPlacement p = LayerPlacement::block(4, 2, 3);  // e0 on rank 0, e1 on rank 1, e3 (idle) on rank 0
  p.experts[1] = {Replica{1, 1.0}};
  p.experts[2] = {Replica{0, 0.5}, Replica{1, 0.5}};
  p.experts[3] = {Replica{0, 1.0}};
  const std::vector<double> load{1000, 500, 1e-20, 0};
  assign_shares(p, load, true);
  CHECK_NOTHROW(p.validate());
  CHECK(p.experts[2][0].share == 0.0);
  CHECK(p.experts[2][1].share == 1.0);
  // A load that does fill: 300 tokens level ranks 0 and 1 at (1000 + 500 + 300) / 2 = 900.
  const std::vector<double> load2{1000, 500, 300, 0};
  assign_shares(p, load2, true);
  CHECK(p.experts[2][0].share == 0.0);
  CHECK(p.experts[2][1].share == Approx(1.0).epsilon(1e-12));
  const std::vector<double> load3{1000, 500, 700, 0};
  assign_shares(p, load3, true);
  CHECK(p.experts[2][0].share * 700 == Approx(100).epsilon(1e-9));  // both ranks at 1100
  CHECK(p.experts[2][1].share * 700 == Approx(600).epsilon(1e-9));
}
TEST_CASE("load monitor: exponential smoothing of the routing counts", "[placement][monitor]") {
  LoadMonitor mon(2, 2, 0.5);
  CHECK(mon.empty());
  mon.observe({{100, 10}, {0, 4}});
  CHECK(mon.estimate(0) == std::vector<double>{100, 10});
  mon.observe({{200, 30}, {8, 4}});
  CHECK(mon.estimate(0) == std::vector<double>{150, 20});
  mon.observe({{300, 20}, {0, 4}});
  CHECK(mon.estimate(0) == std::vector<double>{225, 20});
  CHECK(mon.estimate(1) == std::vector<double>{2, 4});
  CHECK(mon.last(0) == std::vector<std::int64_t>{300, 20});
  CHECK_THROWS_WITH(mon.observe({{1, 2, 3}, {1, 2}}), Catch::Contains("layer 0 has counts for 3 experts"));
  CHECK_THROWS(LoadMonitor(1, 1, 1.0));
}

TEST_CASE("flexmoe policy: plans after its warm-up, on the interval, on imbalance, and logs changes",
          "[placement][policy]") {
  FlexMoeOptions o;
  o.threshold = 1.2;
  o.warmup = 2;
  o.planner.interval = 2;
  o.planner.noise_z = 0;
  o.smoothing = 0.0;
  FlexMoePolicy policy(compute_bound_model(), 1, 4, o);
  const std::vector<LayerPlacement> current{LayerPlacement::block(4, 4, 2)};
  CHECK(policy.plan(0, current) == current);  // nothing observed yet
  policy.observe(0, {{1000, 100, 100, 100}}, 0.9);
  CHECK(policy.plan(1, current) == current);  // one observation: still warming up
  policy.observe(1, {{100, 100, 100, 100}}, 0.5);
  CHECK(policy.plan(2, current) == current);  // warmed up, but balanced
  CHECK(policy.plans_run() == 0);
  policy.observe(2, {{1000, 100, 100, 100}}, 0.9);
  CHECK(policy.plan(3, current) == current);  // imbalanced, but one observation after the last chance
  CHECK(policy.plans_run() == 0);
  policy.observe(3, {{1000, 100, 100, 100}}, 0.9);
  const auto next = policy.plan(4, current);
  CHECK(policy.plans_run() == 1);
  REQUIRE(next.size() == 1);
  CHECK(next[0].experts[0].size() == 4);
  CHECK(policy.take_changes().empty());  // step time after the change not seen yet
  policy.observe(4, {{1000, 100, 100, 100}}, 0.4);
  const auto log = policy.take_changes();
  REQUIRE(log.size() == 3);
  CHECK(log[0].change.iteration == 4);
  CHECK(log[0].step_seconds_before == 0.9);
  CHECK(log[0].step_seconds_after == 0.4);
  const auto j = log[0].to_json();
  CHECK(j["op"] == "expand");
  CHECK(j["expert"] == 0);
  policy.observe(5, {{1000, 100, 100, 100}}, 0.4);
  CHECK(policy.plan(6, next) == next);  // balanced now
}

TEST_CASE("planner: a gain within a few standard errors of the counts' noise is not taken", "[placement][planner]") {
  // Expert 0 carries 120 tokens, the others 100 (1 ms a token). Its first replica levels two
  // ranks at 110: 10 ms gained, while the busiest ranks' counts (120 before, 110 after) have a
  // standard error of sqrt(230) = 15.2 tokens: three of them are 45 ms. With 100x the tokens the
  // gain is 1000 ms and three standard errors 455 ms: it is taken.
  const CostModel m = compute_bound_model();
  const auto current = LayerPlacement::block(4, 4, 2);
  PlannerOptions o;
  o.noise_z = 3;
  o.variance_per_token = 1;
  CHECK(plan_layer(m, current, {120, 100, 100, 100}, o).changes.empty());
  const LayerPlan large = plan_layer(m, current, {12000, 10000, 10000, 10000}, o);
  REQUIRE(!large.changes.empty());
  CHECK(large.changes.front().op == "expand");
  CHECK(large.changes.front().predicted_gain == Approx(1.0).epsilon(1e-6));
  // Without the noise margin the small gain is taken too.
  o.noise_z = 0;
  CHECK(!plan_layer(m, current, {120, 100, 100, 100}, o).changes.empty());
}
