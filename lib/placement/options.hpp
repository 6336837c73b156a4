// The [placement] section of moe_train's and placement_sim's configs as plain values, one field
// per key (placement.<field>), and what lib/placement makes of them. The apps' options files fill
// it from their configs; the defaults and ranges are declared there.
#pragma once
#include <string>

#include "lib/placement/flexmoe.hpp"

namespace skew::placement {

struct PlacementSettings {
  int slots_per_rank{};  // 0 = experts per rank + 1
  double threshold{};
  int interval{};
  double smoothing{};
  int warmup{};
  double noise_z{};
  int lookahead{};
  int max_ops{};
  std::string flexmoe_variant;  // paper or hedge
  double hedge{};
  std::string shares;  // live, balanced or even
  // Cost-model overrides: 0 = measure (latency: -1 = measure).
  double gemm_flops{}, alltoall_bandwidth{}, nvlink_bandwidth{}, allreduce_bandwidth{};
  double alltoall_latency{};
  double stage_latency{};  // seconds; 0 = none (never measured)
  int gpus_per_node{};
  int activation_bytes{}, grad_bytes_per_param{}, state_bytes_per_param{};
};

// The cost constants as configured (0 = measure; latency -1 = measure), the expert's byte sizes
// (params and hidden_dim are left to the model), the FlexMoE options and slots_per_rank as
// configured (0 = experts per rank + 1). `experts_device`: where the experts run (moe_train's
// resolved train.device), which the cost model times the expert GEMMs on.
PlacementOptions placement_options(const PlacementSettings& settings, Device experts_device = Device::Host);

// placement.slots_per_rank for `num_experts` experts on `world_size` ranks, 0 resolved to experts
// per rank + 1. Throws when the experts are not a multiple of the ranks.
int slots_per_rank(const PlacementSettings& settings, int num_experts, int world_size);

}  // namespace skew::placement
