// Routing traces for the simulator: per iteration, tokens routed to each expert of each MoE
// layer (RoutingCounts). Read from JSONL (one object per iteration, as moe_train's metrics
// write them) or generated with a Zipf skew over experts whose popularity order drifts.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.hpp"
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

// The generator between iterations: each layer's popularity order and the random stream. A
// copy continues identically; fork() continues the same past with another stream's drift and
// sampling noise (another future, e.g. to see what a plan made now could have been worth).
class TraceGenerator {
 public:
  explicit TraceGenerator(const TraceSpec& spec);
  // The next iteration's counts (the order drifts before every iteration but the first).
  RoutingCounts next();
  TraceGenerator fork(std::uint64_t seed) const;

 private:
  TraceSpec spec_;
  std::vector<double> weight_;
  double total_weight_ = 0;
  Rng rng_;
  std::vector<std::vector<int>> order_;  // order_[l][i] = the expert holding popularity rank i in layer l
  int generated_ = 0;
};

// spec.iterations of TraceGenerator(spec).
RoutingTrace generate_trace(const TraceSpec& spec);

// `length` iterations of other futures after `iteration` of a trace: the same past, other draws.
using FutureSampler = std::function<std::vector<RoutingTrace>(std::int64_t iteration, std::int64_t length)>;

// For the trace generate_trace(spec) makes: `count` futures from the generator's state before
// `iteration`, each forked on its own seed (from spec.seed, the iteration and its index).
FutureSampler trace_futures(const TraceSpec& spec, int count);

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
