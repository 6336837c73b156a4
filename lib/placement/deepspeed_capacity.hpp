// DeepSpeed's per-rank expert capacity (its `_capacity`), shared by moe_train's deepspeed policy
// and placement_sim's deepspeed baseline so that the simulator pads and drops exactly as the
// trainer does.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"

namespace skew::placement {

// Slots each expert gets from one rank that routes `tokens` tokens top-`top_k` over `experts`
// experts: max(ceil(tokens / experts * (factor * top_k)), min_capacity), in DeepSpeed's order of
// float operations. `tokens` is a double so that the simulator can pass a mean per rank.
inline std::int64_t deepspeed_capacity(double tokens, int experts, int top_k, double capacity_factor,
                                       std::int64_t min_capacity) {
  SKEW_CHECK(experts > 0 && top_k > 0 && capacity_factor > 0 && tokens >= 0,
             "deepspeed capacity of " << tokens << " tokens, " << experts << " experts, top-" << top_k << ", factor "
                                      << capacity_factor);
  const double slots = std::ceil(tokens / experts * (capacity_factor * static_cast<double>(top_k)));
  return std::max(static_cast<std::int64_t>(slots), min_capacity);
}

}  // namespace skew::placement
