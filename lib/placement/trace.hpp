// Routing traces for the simulator: per iteration, tokens routed to each expert of each MoE
// layer (RoutingCounts). Read from JSONL (one object per iteration, as moe_train's metrics
// write them) or generated with a Zipf skew over experts whose popularity order drifts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/placement/policy.hpp"

namespace skew::placement {

using RoutingTrace = std::vector<RoutingCounts>;

struct TraceSpec {
  int iterations = 100;
  int layers = 1;
  int experts = 64;
  std::int64_t assignments = 65536;  // tokens x top-k routed per layer per iteration
  double zipf = 0.3;                 // popularity of the i-th hottest expert ~ 1 / i^zipf
  double drift = 0.05;  // per iteration, each pair of neighbours in popularity order swaps with this probability
  double noise = 1.0;   // multiplier of the sqrt(count) sampling noise (0 = exact expectations)
  std::uint64_t seed = 1;
};

RoutingTrace generate_trace(const TraceSpec& spec);

// Reads lines holding `key`: an array of layers of per-expert counts (or one flat array for a
// single layer). Lines without the key are skipped; a malformed one throws naming path:line.
RoutingTrace read_trace_jsonl(const std::string& path, const std::string& key);

// A recorded trace's experts are split evenly over the ranks set by key `ranks_key` (read from
// `ranks_source`); otherwise throws naming the trace file and that key.
void check_trace_fits_ranks(const RoutingTrace& trace, const std::string& path, int world_size,
                            const std::string& ranks_key, const std::string& ranks_source);

// Mean over iterations and layers of max/mean expert-to-rank load for the block placement.
double trace_balance_ratio(const RoutingTrace& trace, int world_size);

}  // namespace skew::placement
