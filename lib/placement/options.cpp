#include "lib/placement/options.hpp"

#include "core/error.hpp"

namespace skew::placement {

PlacementOptions placement_options(const PlacementSettings& settings, Device experts_device) {
  PlacementOptions p;
  CostConstants& c = p.cost_overrides;
  c.gemm_flops = settings.gemm_flops;
  c.alltoall_bandwidth = settings.alltoall_bandwidth;
  c.nvlink_bandwidth = settings.nvlink_bandwidth;
  c.allreduce_bandwidth = settings.allreduce_bandwidth;
  c.gpus_per_node = settings.gpus_per_node;
  c.alltoall_latency = settings.alltoall_latency;
  c.stage_latency = settings.stage_latency;

  ExpertShape& s = p.shape;
  s.device = experts_device;  // the cost model times the expert GEMMs where they run
  s.activation_bytes = settings.activation_bytes;
  s.grad_bytes_per_param = settings.grad_bytes_per_param;
  s.state_bytes_per_param = settings.state_bytes_per_param;

  FlexMoeOptions& o = p.flexmoe;
  o.threshold = settings.threshold;
  o.smoothing = settings.smoothing;
  o.planner.interval = settings.interval > 0 ? settings.interval : 50;
  o.planner.max_ops = settings.max_ops;
  o.warmup = settings.warmup;
  o.planner.noise_z = settings.noise_z;
  o.planner.lookahead = settings.lookahead;
  // The load estimate is an exponential average of Poisson-like counts: its variance per token.
  o.planner.variance_per_token = (1 - settings.smoothing) / (1 + settings.smoothing);
  o.planner.balanced_shares = settings.shares != "even";
  o.live_shares = settings.shares == "live";
  o.planner.hedge = settings.hedge;
  o.planner.variant = settings.flexmoe_variant == "hedge" ? PlannerVariant::Hedge : PlannerVariant::Paper;

  p.slots_per_rank = settings.slots_per_rank;
  return p;
}

int slots_per_rank(const PlacementSettings& settings, int num_experts, int world_size) {
  SKEW_CHECK(world_size >= 1 && num_experts % world_size == 0,
             "moe.num_experts " << num_experts << " must be a multiple of the " << world_size << " ranks");
  return settings.slots_per_rank > 0 ? settings.slots_per_rank : num_experts / world_size + 1;
}

}  // namespace skew::placement
