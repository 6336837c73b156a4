// The planner's variants (paper: the FlexMoE paper's moves; hedge: plus the hedge move) and its
// migrate move, on constructed loads whose best placement is known in closed form.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/rng.hpp"
#include "lib/placement/planner.hpp"
#include "lib/placement/simulator.hpp"

using namespace skew::placement;

namespace {

// 1 ms of compute per token (6000 FLOPs at 6 MFLOP/s), one rank per node, fast all-to-all and
// state moves; the replica gradient all-reduce (4000 bytes between two ranks) at `allreduce_bw`.
CostModel model(double allreduce_bw) {
  return CostModel({.gemm_flops = 6e6,
                    .nvlink_bandwidth = 1e12,
                    .alltoall_bandwidth = 1e12,
                    .allreduce_bandwidth = allreduce_bw,
                    .gpus_per_node = 1,
                    .alltoall_latency = 0},
                   {.params = 1000, .hidden_dim = 10});
}

}  // namespace

TEST_CASE("planner variants: paper never hedges, both keep every rank within its slots", "[placement][planner]") {
  skew::Rng rng(7, 0);
  int hedges = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int ranks = 2 << static_cast<int>(rng.below(3));  // 2..8
    const int per_rank = 1 + static_cast<int>(rng.below(3));
    const int slots = per_rank + 1 + static_cast<int>(rng.below(2));
    LayerPlacement current = LayerPlacement::block(ranks * per_rank, ranks, slots);
    std::vector<double> load(static_cast<std::size_t>(ranks * per_rank));
    for (auto& l : load) l = 1 + std::floor(1000 * std::pow(rng.uniform(), 3.0f));
    const CostModel m = model(trial % 2 ? 1e12 : 1e7);
    for (PlannerVariant v : {PlannerVariant::Paper, PlannerVariant::Hedge}) {
      PlannerOptions o;
      o.variant = v;
      o.hedge = 0.5;  // generous: the hedge variant fills free slots on most of these loads
      // Two plans in a row: the second starts from the first's placement, slots partly used.
      for (const LayerPlan& plan :
           {plan_layer(m, current, load, o), plan_layer(m, plan_layer(m, current, load, o).placement, load, o)}) {
        CHECK_NOTHROW(plan.placement.validate());
        for (int r = 0; r < ranks; ++r) CHECK(plan.placement.replicas_on(r) <= slots);
        for (const auto& c : plan.changes) {
          if (v == PlannerVariant::Paper) CHECK(c.op != "hedge");
          hedges += c.op == "hedge";
        }
      }
    }
  }
  CHECK(hedges > 0);  // the hedge variant did hedge: the paper variant's check above is not vacuous
}

TEST_CASE("planner: migrate is chosen when a replica's gradient sync costs more than it levels",
          "[placement][planner]") {
  // Two hot experts on rank 0, rank 1 nearly idle, one free slot on each rank. Moving expert 1
  // to rank 1 leaves 100 and 102 tokens (0.102 s); expanding expert 0 instead levels both ranks
  // at 101 tokens but adds its gradient all-reduce, 4000 bytes at 1e5 B/s = 0.04 s (0.141 s).
  // After the migrate, rank 1 (102) is the busiest; migrating expert 2 to rank 0 levels 101/101.
  const auto current = LayerPlacement::block(4, 2, 3);
  const std::vector<double> load{100, 100, 1, 1};
  const PlannerOptions exact{.noise_z = 0};  // exact loads, no sampling noise
  const LayerPlan plan = plan_layer(model(1e5), current, load, exact);
  REQUIRE(plan.changes.size() == 2);
  CHECK(plan.changes[0].op == "migrate");
  CHECK(plan.changes[0].expert == 0);  // the first of the two equally hot experts
  CHECK(plan.changes[0].from_rank == 0);
  CHECK(plan.changes[0].to_rank == 1);
  CHECK(plan.changes[0].predicted_gain == Approx(0.2 - 0.102).epsilon(1e-6));
  CHECK(plan.changes[1].op == "migrate");
  CHECK(plan.changes[1].to_rank == 0);
  CHECK(plan.predicted_before == Approx(0.2).epsilon(1e-6));
  CHECK(plan.predicted_after == Approx(0.101).epsilon(1e-6));
  for (const auto& reps : plan.placement.experts) CHECK(reps.size() == 1);  // no replica to sync
  // With a free all-reduce the same loads are better levelled by a replica: expand wins.
  const LayerPlan cheap = plan_layer(model(1e15), current, load, exact);
  REQUIRE(!cheap.changes.empty());
  CHECK(cheap.changes[0].op == "expand");
}

TEST_CASE("planner: with every slot taken, migrate exchanges replicas between ranks", "[placement][planner]") {
  // Two hot experts on rank 0, two idle ones on rank 1, 2 slots per rank: no free slot, no
  // replica to shrink, so only a migrate that takes a replica back in exchange can move load.
  // Expert 0 goes to rank 1 and expert 2 (rank 1's lightest) comes to rank 0: 101 tokens each.
  const auto current = LayerPlacement::block(4, 2, 2);
  const std::vector<double> load{100, 100, 1, 1};
  const CostModel m = model(1e12);
  const LayerPlan plan = plan_layer(m, current, load, PlannerOptions{.noise_z = 0});
  REQUIRE(plan.changes.size() == 1);
  const PlacementChange& c = plan.changes[0];
  CHECK(c.op == "migrate");
  CHECK(c.expert == 0);
  CHECK(c.from_rank == 0);
  CHECK(c.to_rank == 1);
  CHECK(c.other_expert == 2);
  CHECK(plan.placement.experts_on(0) == std::vector<int>{1, 2});
  CHECK(plan.placement.experts_on(1) == std::vector<int>{0, 3});
  CHECK(plan.predicted_before == Approx(0.2).epsilon(1e-6));
  CHECK(plan.predicted_after == Approx(0.101).epsilon(1e-6));
  // Two state moves, one to each rank, in parallel: 12000 bytes at 1e12 B/s.
  CHECK(plan.change_seconds == Approx(12000 / 1e12));
  CHECK(plan_transfers(current, plan.placement).size() == 2);
}

TEST_CASE("simulator: under a full slot budget flexmoe moves load only by migrating", "[placement][sim]") {
  // 8 GPUs with 2 experts each and 2 slots each: expand, shrink and shift have nothing to work
  // with, so every change is a migrate exchange, and it must beat the static placement.
  TraceSpec t;
  t.iterations = 60, t.layers = 2, t.experts = 16, t.assignments = 8 * 4096 * 2, t.zipf = 0.6, t.drift = 0.05;
  t.seed = 5;
  SimSetup s;
  s.constants = {.gemm_flops = 100e12,
                 .nvlink_bandwidth = 150e9,
                 .alltoall_bandwidth = 25e9,
                 .allreduce_bandwidth = 25e9,
                 .gpus_per_node = 8,
                 .alltoall_latency = 20e-6};
  s.shape = {.params = 2 * 1024 * 4096, .hidden_dim = 1024, .activation_bytes = 2, .grad_bytes_per_param = 2};
  s.gpus = 8;
  s.slots_per_rank = 2;
  s.flexmoe.planner.interval = 10;
  std::vector<std::string> ops;
  const std::string path = "test_placement_variants_changes.jsonl";
  {
    skew::JsonlWriter log(path);
    s.change_log = &log;
    const auto series = simulate(generate_trace(t), s);
    log.close();
    CHECK(series[3].policy == "flexmoe");
    CHECK(series[3].changes > 0);
    CHECK(series[3].mean_step() < series[0].mean_step() * 0.99);  // static
  }
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) ops.push_back(skew::Json::parse(line)["op"].get<std::string>());
  std::remove(path.c_str());
  REQUIRE(!ops.empty());
  for (const auto& op : ops) CHECK(op == "migrate");
}
