// The [placement] section shared by moe_train's and placement_sim's configs: its keys, and their
// values as lib/placement's settings (lib/placement/options.hpp), which declares no keys.
#pragma once
#include "core/config.hpp"
#include "lib/placement/options.hpp"

namespace skew {

// The [placement] keys: slots_per_rank, threshold, interval, smoothing, planner options,
// cost-model overrides (0 = measure at start-up) and byte sizes.
void add_placement_keys(Schema& schema);

// The [placement] values of a config holding add_placement_keys (each key's range is checked
// when the config is parsed).
placement::PlacementSettings placement_settings(const Config& config);

}  // namespace skew
