// The [placement] section of moe_train's and placement_sim's configs: its keys, and their values
// as lib/placement's plain options (which declares no config keys), with the range checks.
#pragma once
#include "core/config.hpp"
#include "lib/placement/flexmoe.hpp"

namespace skew::moe {

// The [placement] keys: slots_per_rank, threshold, interval, smoothing, planner options,
// cost-model overrides (0 = measure at start-up) and byte sizes.
void add_placement_keys(Schema& schema);

// The [placement] values of a config holding add_placement_keys: cost constants as configured
// (0 = measure; latency -1 = measure), the expert's byte sizes (params and hidden_dim are left to
// the model), the FlexMoE options and slots_per_rank as configured (0 = experts per rank + 1).
// Each key's range is checked when the config is parsed. `experts_device`: where the experts run
// (moe_train's resolved train.device), which the cost model times the expert GEMMs on.
placement::PlacementOptions placement_options_from_config(const Config& config, Device experts_device = Device::Host);

// placement.slots_per_rank for `num_experts` experts on `world_size` ranks, 0 resolved to experts
// per rank + 1. Throws when the experts are not a multiple of the ranks.
int slots_per_rank_from_config(const Config& config, int num_experts, int world_size);

}  // namespace skew::moe
