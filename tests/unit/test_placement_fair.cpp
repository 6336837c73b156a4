// One fair simulator (issue 35, item 1): every policy and the ideal share the exchange schedule,
// pipelined stages pay their latency, and no policy's step beats the ideal under either schedule.
#include <catch2/catch.hpp>

#include "lib/placement/simulator.hpp"

using namespace skew::placement;

namespace {

// configs/sim_64gpu.ini's A100-class cluster: 100 TFLOP/s, NVLink 150 GB/s, 25 GB/s network,
// 20 us a round and a stage; d_model 1024, d_ff 4096, bf16 on the wire, fp32 state + moments.
SimSetup a100_cluster(int gpus, Overlap overlap) {
  SimSetup s;
  s.constants = {.gemm_flops = 100e12,
                 .nvlink_bandwidth = 150e9,
                 .alltoall_bandwidth = 25e9,
                 .allreduce_bandwidth = 25e9,
                 .gpus_per_node = 8,
                 .alltoall_latency = 20e-6,
                 .stage_latency = 20e-6};
  s.shape.params = 2 * 1024 * 4096;
  s.shape.hidden_dim = 1024;
  s.shape.activation_bytes = 2;
  s.shape.grad_bytes_per_param = 2;
  s.shape.state_bytes_per_param = 14;
  s.gpus = gpus;
  s.schedule = {overlap, overlap == Overlap::Pipelined ? 4 : 1};
  return s;
}

struct Workload {
  int gpus, experts_per_gpu;
  std::int64_t tokens_per_gpu;
  double zipf;
  int gpus_per_node;
};

RoutingTrace trace_of(const Workload& w, std::uint64_t seed) {
  TraceSpec t;
  t.iterations = 12;
  t.layers = 1;
  t.experts = w.gpus * w.experts_per_gpu;
  t.assignments = w.tokens_per_gpu * 2 * w.gpus;
  t.zipf = w.zipf;
  t.drift = 0.2;
  t.seed = seed;
  return generate_trace(t);
}

}  // namespace

TEST_CASE("exchange schedule: none adds, pipelined overlaps in stages that pay their latency", "[placement][fair]") {
  CostConstants c;
  c.stage_latency = 0.5;
  const CostModel m(c, {.params = 10, .hidden_dim = 4});
  CHECK(m.scheduled_seconds(3.0, 8.0, 4, {Overlap::None, 4}) == 11.0);
  // Four rounds each pay 3 more stage latencies: the exchange is 8 + 4 x 3 x 0.5 = 14 s; 3 s of
  // compute hides under it but for its last stage: 14 + 3 / 4.
  CHECK(m.scheduled_seconds(3.0, 8.0, 4, {Overlap::Pipelined, 4}) == Approx(14.75));
  CHECK(m.scheduled_seconds(20.0, 8.0, 4, {Overlap::Pipelined, 4}) == Approx(20.0 + 14.0 / 4));
  CHECK(m.scheduled_seconds(3.0, 8.0, 4, {Overlap::Pipelined, 1}) == 11.0);  // one stage: no overlap
  CHECK(m.scheduled_seconds(3.0, 0.0, 1, {Overlap::Pipelined, 4}) == 3.0);   // one rank: no exchange
}

TEST_CASE("ideal: balanced compute and the cheaper of tokens or parameters per expert", "[placement][fair]") {
  // Two GPUs on one node, 1 ms a token, 40-byte tokens at 4000 B/s on NVLink, 4000 gradient
  // bytes: expert 0 (300 tokens) sends 150 x 40 B x 4 rounds = 6 s of tokens or 2 x 4000 B = 2 s
  // of parameters, expert 1 (100 tokens) 2 s either way: 4 s of link time, 2 s a rank; compute
  // 200 tokens = 0.2 s.
  CostConstants c{.gemm_flops = 6e6,
                  .nvlink_bandwidth = 4000,
                  .alltoall_bandwidth = 1000,
                  .allreduce_bandwidth = 2000,
                  .gpus_per_node = 2};
  const ExpertShape shape{.params = 1000, .hidden_dim = 10};
  const std::vector<std::int64_t> counts{300, 100};
  CHECK(ideal_step(CostModel(c, shape), counts, 2) == Approx(2.2));
  // Pipelined in 4 stages: 2.2 s in all, of which the most that can overlap is 1.1 s each side:
  // 2.2 - (1 - 1/4) x 1.1.
  CHECK(ideal_step(CostModel(c, shape, {Overlap::Pipelined, 4}), counts, 2) == Approx(2.2 - 0.75 * 1.1));
  // FasterMoE shadowing both experts reaches the bound without overlap (no tokens cross).
  const CostModel none(c, shape);
  CHECK(fastermoe_step(none, none, counts, 2, nullptr) == Approx(2.2));
}

TEST_CASE("ideal: no policy beats it under either schedule", "[placement][fair]") {
  // The case (8 GPUs x 4 experts, 64 tokens a GPU, where fastermoe's private overlap
  // once beat a no-overlap ideal) and paper-sized ones, across nodes and on one node.
  const std::vector<Workload> workloads{{8, 4, 64, 0.3, 8},    {16, 1, 4096, 1.0, 8}, {64, 1, 4096, 0.6, 8},
                                        {32, 4, 1024, 1.0, 8}, {4, 2, 2048, 1.2, 8},  {16, 2, 16384, 0.3, 4}};
  for (const auto& w : workloads)
    for (Overlap overlap : {Overlap::None, Overlap::Pipelined})
      for (std::uint64_t seed : {1, 2}) {
        SimSetup s = a100_cluster(w.gpus, overlap);
        s.constants.gpus_per_node = w.gpus_per_node;
        const auto results = simulate(trace_of(w, seed), s);
        const PolicySeries& ideal = results.back();
        REQUIRE(ideal.policy == "ideal");
        for (const auto& p : results) {
          if (p.policy == "ideal") continue;
          for (std::size_t it = 0; it < ideal.step_seconds.size(); ++it) {
            INFO(w.gpus << " GPUs x " << w.experts_per_gpu << ", " << w.tokens_per_gpu << " tokens, zipf " << w.zipf
                        << ", overlap " << overlap_name(overlap) << ", seed " << seed << ", " << p.policy
                        << " iteration " << it);
            CHECK(p.step_seconds[it] >= ideal.step_seconds[it] * (1 - 1e-12));
          }
        }
      }
}
