// Simulator: each policy's step time on a tiny hand-computed case, traces from JSONL and from
// the generator.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "lib/placement/deepspeed_capacity.hpp"
#include "lib/placement/simulator.hpp"
#include "lib/placement/validate.hpp"

using namespace skew::placement;

namespace {

// 2 GPUs on one node; 1 ms of compute per token; 40-byte tokens at 4000 B/s; 4000 gradient
// bytes and 12000 state bytes per expert.
SimSetup tiny_setup() {
  SimSetup s;
  s.constants.gemm_flops = 6e6;
  s.constants.nvlink_bandwidth = 4000;
  s.constants.alltoall_bandwidth = 1000;
  s.constants.allreduce_bandwidth = 2000;
  s.constants.gpus_per_node = 2;
  s.shape.params = 1000;
  s.shape.hidden_dim = 10;
  s.gpus = 2;
  s.flexmoe.smoothing = 0;
  return s;
}

}  // namespace

TEST_CASE("simulator: baselines on a hand-computed two-GPU case", "[placement][sim]") {
  const SimSetup s = tiny_setup();
  const CostModel m(s.constants, s.shape);
  const std::vector<std::int64_t> counts{300, 100};
  // Rank 0 computes 300 tokens (0.3 s) and receives 150 x 40 B from rank 1 (1.5 s a round, 4 rounds).
  CHECK(static_step(m, counts, 2) == Approx(6.3));
  std::int64_t dropped = -1;
  CHECK(deepspeed_step(m, counts, 2, 0.0, 4, &dropped) == Approx(6.3));  // both padded to 300
  CHECK(dropped == 0);
  // 200 choices per rank: 100 slots per expert from each rank, 200 in all: 0.2 s + 4 x 1 s.
  CHECK(deepspeed_step(m, counts, 2, 1.0, 4, &dropped) == Approx(4.2));
  CHECK(dropped == 100);
  // The ideal: 0.2 s of balanced compute and, per expert, the cheaper of its tokens crossing or
  // its parameters going both ways (2 s each here): 2 s a rank (test_placement_fair.cpp).
  CHECK(ideal_step(m, counts, 2) == Approx(2.2));
  // Shadowing expert 0: loads 150 + 100 on rank 1 (0.25 s), 100 tokens cross (4 x 0.5 s), one
  // 4000-byte all-reduce on NVLink (1 s) = 3.25 s; shadowing expert 1 too: 0.2 + 0 + 2 = 2.2 s.
  int shadows = 0;
  double balance = 0;
  CHECK(fastermoe_step(m, m, counts, 2, &shadows, &balance) == Approx(2.2));
  CHECK(shadows == 2);
  CHECK(balance == Approx(1.0));
  // Pipelined in 4 chunks with 10x faster links: no shadow (1 all-reduce = 0.1 s) 0.3 s compute
  // overlaps 4 x 0.15 s all-to-all: 0.6 + 0.3 / 4 = 0.675 s; shadowing expert 0: loads 150/250,
  // 4 x 0.05 s all-to-all: 0.25 + 0.2 / 4 + 0.1 = 0.4 s; both: 0.2 + 0 + 0.2 = 0.4 s, not
  // strictly better, so one shadow.
  SimSetup fast = s;
  fast.constants.nvlink_bandwidth = 40000;
  const CostModel mf(fast.constants, fast.shape, {Overlap::Pipelined, 4});
  CHECK(fastermoe_step(mf, mf, counts, 2, &shadows) == Approx(0.4));
  CHECK(shadows == 1);
}

TEST_CASE("simulator: deepspeed pads and drops with moe_train's per-rank capacity", "[placement][sim]") {
  const SimSetup s = tiny_setup();
  const CostModel m(s.constants, s.shape);
  std::int64_t dropped = -1;
  // 18 choices over 2 ranks: 9 per rank, top-1 over 2 experts at factor 1 -> ceil(4.5) = 5 slots
  // per rank (moe_train's capacity for a rank routing 9 tokens), 10 per expert: expert 0 drops
  // 14 - 10 = 4. A capacity taken over the whole cluster, ceil(18 / 2) = 9, would drop 5.
  deepspeed_step(m, {14, 4}, 2, 1.0, 0, &dropped);
  CHECK(dropped == 4);
  CHECK(deepspeed_capacity(9.0, 2, 1, 1.0, 0) == 5);
  // min_capacity lifts each rank's 5 slots to 7: 14 per expert, nothing dropped.
  deepspeed_step(m, {14, 4}, 2, 1.0, 7, &dropped);
  CHECK(dropped == 0);
  // The padded buffer costs what it holds: 2 experts x 7 slots on each rank, in compute and in
  // the all-to-all, the same as the static step on an even [14, 14] split.
  CHECK(deepspeed_step(m, {14, 4}, 2, 1.0, 7, nullptr) == Approx(static_step(m, {14, 14}, 2)));
}

TEST_CASE("simulator: flexmoe replicates both experts and pays the moves", "[placement][sim]") {
  SimSetup s = tiny_setup();
  // Exact counts, planned after the first step with a one-step horizon.
  s.flexmoe.warmup = 1;
  s.flexmoe.planner.interval = 1;
  s.flexmoe.planner.noise_z = 0;
  const RoutingTrace trace(3, RoutingCounts{{300, 100}});
  const auto r = simulate(trace, s);
  REQUIRE(r.size() == 5);
  const auto& flex = r[3];
  CHECK(flex.policy == "flexmoe");
  // Iteration 0: nothing observed, static placement (6.3 s). Iteration 1: expert 0 gains a
  // replica on rank 1 and expert 1 one on rank 0: every rank computes its own tokens, 200 each
  // (0.2 s), no token crosses, two 4000-byte all-reduces over NVLink (2 s), plus the two
  // 12000-byte state moves, one each way on its own link (3 s): 5.2 s. Iteration 2: balanced,
  // no change: 2.2 s, the ideal.
  REQUIRE(flex.step_seconds.size() == 3);
  CHECK(flex.step_seconds[0] == Approx(6.3));
  CHECK(flex.step_seconds[1] == Approx(5.2));
  CHECK(flex.step_seconds[2] == Approx(2.2));
  CHECK(flex.balance[2] == Approx(1.0));
  CHECK(flex.changes == 2);
  CHECK(r[0].mean_step() == Approx(6.3));
  CHECK(r[4].mean_step() == Approx(2.2));
}

TEST_CASE("validation reads back logged placements", "[placement][sim]") {
  LayerPlacement p = LayerPlacement::block(4, 2, 3);
  p.experts[1] = {{0, 0.25}, {1, 0.75}};
  p.experts[3] = {{0, 1.0 / 3}, {1, 2.0 / 3}};
  const LayerPlacement q = parse_placement(p.to_string());
  CHECK(q == p);
  CHECK(q.experts[3][1].share == 2.0 / 3);  // 17 digits: the exact double
  CHECK_THROWS_WITH(parse_placement("N=2 S=3 e0:0@1, e2:1@1,"), Catch::Contains("experts out of order"));
}

TEST_CASE("traces: generated counts and JSONL round trip", "[placement][trace]") {
  TraceSpec spec;
  spec.iterations = 20;
  spec.layers = 2;
  spec.experts = 16;
  spec.assignments = 100000;
  spec.zipf = 0.5;
  const auto a = generate_trace(spec), b = generate_trace(spec);
  CHECK(a == b);  // deterministic in the seed
  REQUIRE(a.size() == 20);
  std::int64_t total = 0;
  for (auto c : a[0][1]) total += c;
  CHECK(std::abs(total - 100000) < 2000);
  CHECK(trace_balance_ratio(a, 16) > 1.5);  // 1 / i^0.5 over 16 experts: max/mean = 16 / 6.9 ~ 2.3
  spec.zipf = 0;
  spec.noise = 0;
  CHECK(trace_balance_ratio(generate_trace(spec), 4) == Approx(1.0));

  const std::string path = "test_placement_trace.jsonl";
  {
    std::ofstream out(path);
    out << R"({"step": 0, "tokens_per_expert": [[5, 7], [1, 2]]})"
        << "\n"
        << R"({"summary": true})"
        << "\n"
        << R"({"step": 1, "tokens_per_expert": [[6, 6], [0, 3]]})"
        << "\n";
  }
  const auto t = read_trace_jsonl(path, "tokens_per_expert");
  REQUIRE(t.size() == 2);
  CHECK(t[1] == RoutingCounts{{6, 6}, {0, 3}});
  {
    std::ofstream out(path);
    out << R"({"tokens_per_expert": [[5, 7]]})"
        << "\n"
        << R"({"tokens_per_expert": [[5, 7, 1]]})"
        << "\n";
  }
  CHECK_THROWS_WITH(read_trace_jsonl(path, "tokens_per_expert"), Catch::Contains(path + ":2"));
  std::remove(path.c_str());
}

TEST_CASE("traces: experts that do not split over the ranks name the trace and the key", "[placement][trace]") {
  const RoutingTrace six_experts{{{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}}};
  CHECK_THROWS_WITH(check_trace_fits_ranks(six_experts, "run/trace.jsonl", 4, "sim.gpus", "command line"),
                    Catch::Contains("run/trace.jsonl: the trace has 6 experts, not a multiple of the 4 ranks of key "
                                    "'sim.gpus' (command line)"));
  for (int ranks : {1, 2, 3, 6}) CHECK_NOTHROW(check_trace_fits_ranks(six_experts, "t", ranks, "sim.gpus", "default"));
  CHECK_THROWS(check_trace_fits_ranks(six_experts, "t", 0, "sim.gpus", "default"));
}
