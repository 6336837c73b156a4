#include "apps/placement_options.hpp"

namespace skew {

void add_placement_keys(Schema& schema) {
  schema
      .add_int("placement.slots_per_rank", 0, {0, 1 << 16},
               "expert slots per rank (memory budget); 0 = experts per rank + 1")
      .add_float("placement.threshold", 1.2, FloatRange::at_least(1),
                 "re-plan (at the interval) when a layer's predicted max/mean rank load exceeds this")
      .add_int("placement.interval", 50, {0, kMaxInt32},
               "flexmoe considers a plan every this many iterations (0 = 50), and runs it when the threshold is "
               "exceeded; the horizon a change's cost is amortised over")
      .add_float("placement.smoothing", 0.3, {.min = 0, .max = 1, .max_open = true},
                 "exponential smoothing of the per-expert load estimate, in [0, 1): estimate = smoothing x "
                 "estimate + (1 - smoothing) x counts")
      .add_int("placement.warmup", 5, {1, kMaxInt32}, "iterations observed before flexmoe's first plan")
      .add_float("placement.noise_z", 3, {0, 100},
                 "a planned change must gain more than this many standard errors of the load estimate's sampling "
                 "noise (Poisson counts on the busiest ranks); 0 = no noise margin")
      .add_int("placement.lookahead", 4, {0, 64},
               "when no single planner step pays: the best pair of steps starting from this many best first "
               "steps is tried (0 = greedy only)")
      .add_int("placement.max_ops", 0, {0, kMaxInt32},
               "greedy expand/shrink/migrate steps per layer per plan; 0 = until none pays off")
      .add_choice("placement.flexmoe_variant", "paper", {"paper", "hedge"},
                  "flexmoe planner: paper (the FlexMoE paper's expand, shrink, shift and migrate under the slot "
                  "budget) or hedge (the same, then the hedge move, not in the paper: see placement.hedge)")
      .add_float("placement.hedge", 0.02, FloatRange::at_least(0),
                 "flexmoe_variant = hedge: fill free slots with replicas of the hottest experts while each costs at "
                 "most this fraction of "
                 "the predicted step (gradient sync, amortised move): spare replicas let live shares absorb load "
                 "shifts the estimate has not seen; 0 = off")
      .add_choice("placement.shares", "live", {"live", "balanced", "even"},
                  "token split among replicas: live (the planner's replica sets, shares re-levelled every step "
                  "from that step's counts), balanced (shares levelling the ranks' predicted loads, fixed between "
                  "plans) or even")
      .add_float("placement.gemm_flops", 0, FloatRange::at_least(0),
                 "expert compute rate per rank, FLOP/s at 6 per parameter and token (forward and backward), of the "
                 "cost model flexmoe and fastermoe decide on (this and the link keys below); 0 = measure at start-up "
                 "(an expert's whole forward and backward over 256 tokens)")
      .add_float("placement.alltoall_bandwidth", 0, FloatRange::at_least(0),
                 "per-rank all-to-all bandwidth across nodes, bytes/s; 0 = measure")
      .add_float("placement.nvlink_bandwidth", 0, FloatRange::at_least(0),
                 "per-rank bandwidth inside a node, bytes/s; 0 = measure")
      .add_float("placement.allreduce_bandwidth", 0, FloatRange::at_least(0),
                 "bus bandwidth of replica gradient all-reduce across nodes, bytes/s; 0 = measure")
      .add_float("placement.alltoall_latency", -1, FloatRange::at_least(-1),
                 "fixed seconds per all-to-all round; -1 = measure at start-up")
      .add_float("placement.stage_latency", 0, {0, 1},
                 "seconds each further pipeline stage adds to an all-to-all round (a round in S stages pays "
                 "alltoall_latency + (S - 1) x this); 0 = none")
      .add_int("placement.gpus_per_node", 8, {1, 1 << 16}, "ranks per node: pairs inside one node use nvlink_bandwidth")
      .add_int("placement.activation_bytes", 4, {1, 16}, "bytes per activation element sent in the all-to-all")
      .add_int("placement.grad_bytes_per_param", 4, {1, 16}, "bytes per gradient element in the replica all-reduce")
      .add_int("placement.state_bytes_per_param", 12, {1, 64},
               "bytes moved per parameter with a replica (parameter + optimiser moments)");
}

placement::PlacementSettings placement_settings(const Config& c) {
  placement::PlacementSettings p;
  p.slots_per_rank = c.get_int_as<int>("placement.slots_per_rank");
  p.threshold = c.get_float("placement.threshold");
  p.interval = c.get_int_as<int>("placement.interval");
  p.smoothing = c.get_float("placement.smoothing");
  p.warmup = c.get_int_as<int>("placement.warmup");
  p.noise_z = c.get_float("placement.noise_z");
  p.lookahead = c.get_int_as<int>("placement.lookahead");
  p.max_ops = c.get_int_as<int>("placement.max_ops");
  p.flexmoe_variant = c.get_string("placement.flexmoe_variant");
  p.hedge = c.get_float("placement.hedge");
  p.shares = c.get_string("placement.shares");
  p.gemm_flops = c.get_float("placement.gemm_flops");
  p.alltoall_bandwidth = c.get_float("placement.alltoall_bandwidth");
  p.nvlink_bandwidth = c.get_float("placement.nvlink_bandwidth");
  p.allreduce_bandwidth = c.get_float("placement.allreduce_bandwidth");
  p.alltoall_latency = c.get_float("placement.alltoall_latency");
  p.stage_latency = c.get_float("placement.stage_latency");
  p.gpus_per_node = c.get_int_as<int>("placement.gpus_per_node");
  p.activation_bytes = c.get_int_as<int>("placement.activation_bytes");
  p.grad_bytes_per_param = c.get_int_as<int>("placement.grad_bytes_per_param");
  p.state_bytes_per_param = c.get_int_as<int>("placement.state_bytes_per_param");
  return p;
}

}  // namespace skew
