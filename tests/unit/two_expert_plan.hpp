// The hand-computed two-expert case of the plan tests: two experts on two GPUs of one node,
// expert 0 (count a) on rank 0, expert 1 (count b) on rank 1, each source holding half of each
// expert's tokens. Before the plan a step (no overlap) is f a + 4 (a / 2) t when a >= b: the
// busiest rank computes a, and every round rank 0 receives a / 2. Expert 0 replicated on rank 1
// with levelled shares puts (a + b) / 2 on each rank, rank 1 keeps (a - b) / 2 of its own half and
// sends b / 2 to rank 0 while rank 0 sends b / 2 of expert 1: f (a + b) / 2 + g + 4 (b / 2) t, with
// g the replicas' gradient all-reduce. When a < b the shares cannot level: the old step's
// f b + 4 (b / 2) t plus g. The plan made on (30000, 10000) replicates expert 0 on rank 1.
#pragma once
#include <algorithm>
#include <cstdint>

#include "lib/placement/simulator.hpp"

namespace skew::placement::testing {

struct TwoExpertPlan {
  SimSetup setup;
  double f = 0, t = 0, g = 0;
  double move = 0;  // expert 0's state, rank 0 -> rank 1

  TwoExpertPlan() {
    const double flops = 1e12, bandwidth = 1e9;
    setup.constants = {.gemm_flops = flops,
                       .nvlink_bandwidth = bandwidth,
                       .alltoall_bandwidth = bandwidth,
                       .allreduce_bandwidth = bandwidth,
                       .gpus_per_node = 8,
                       .alltoall_latency = 0,
                       .stage_latency = 0};
    const std::int64_t params = 1000000;
    setup.shape = {.params = params,
                   .hidden_dim = 1,
                   .activation_bytes = 1,
                   .grad_bytes_per_param = 4,
                   .state_bytes_per_param = 12};
    setup.gpus = 2;
    setup.schedule = {Overlap::None, 1};
    setup.flexmoe.smoothing = 0.5;
    setup.flexmoe.planner.interval = 5;
    setup.flexmoe.planner.noise_z = 0;
    f = 6.0 * params / flops, t = 1.0 / bandwidth, g = 4.0 * params / bandwidth;
    move = 12.0 * params / bandwidth;
  }
  double before(double a, double b) const { return f * std::max(a, b) + 2 * std::max(a, b) * t; }
  double after(double a, double b) const { return a >= b ? f * (a + b) / 2 + g + 2 * b * t : f * b + g + 2 * b * t; }
  double gain(double a, double b) const { return before(a, b) - after(a, b); }
};

}  // namespace skew::placement::testing
