// Worker-speed heterogeneity, injected as real (or, in the simulator, virtual) time per step:
//   step time = (compute + base) * slowdown[w] * model_factor(w, step) + jitter + trace[step][w]
// One implementation for the MPI run (which sleeps it) and the simulator (which adds it to
// its clock): a pure function of (seed, worker, step), so the ranks, the simulator and a
// resumed run all see the same delays.
// slowdown: a list repeated over the workers ("1,1,1,4": every 4th worker 4x slower; list 16
// values for exactly two stragglers among 16);
// model (a factor on top of the fixed slowdown):
//   fixed     - 1 (the slowdown list alone);
//   moving    - every `period` steps a new set of `stragglers` distinct workers (seeded, the
//               same on every worker) is `factor` times slower: the slowness moves;
//   bursty    - every worker is independently `factor` times slower in each period of
//               `period` steps with probability `burst_prob` (on/off bursts: a worker is slow a
//               fraction burst_prob of the time, in bursts of period / (1 - burst_prob) steps
//               on average);
//   pareto    - every worker and step draws its factor from a Pareto distribution with scale 1
//               and tail index `tail_index` (> 1: P(X > x) = x^-tail_index, mean
//               tail_index / (tail_index - 1)), capped at `max_factor`: a heavy tail of stalls;
// base: a nominal device step time, so that a run on few shared cores still models devices;
// jitter: none | exp (mean jitter_ms) | uniform (0..2*jitter_ms) | spike (jitter_ms with
// probability jitter_prob: the authors' transient straggler); trace: a file whose line s holds
// comma-separated delays in ms for step s, one per worker (extra values are unused; the lines
// repeat over the steps).
// link_ms: a slow link instead of slow compute: a list repeated over the workers of the extra
// time (ms) every communication this worker takes part in costs; a group, an all-reduce or a
// gossip pair waits for its slowest member's link.
// placement_shuffled (hetero.placement = shuffled): worker w takes the slowdown and link_ms
// entries of slot pi(w) instead of w, for a permutation pi of the workers drawn from the seed
// (the same on every rank), so which workers straggle is random with respect to any fixed role
// (AD-PSGD's even active / odd passive split): a list like 1,1,1,4 otherwise always slows
// workers 3, 7, 11, ..., all passive. The trace stays per worker.
// The injected part (step time - compute) is reported separately from compute.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace skew::preduce {

// The largest slowdown factor and delay (ms) hetero.slowdown, hetero.link_ms and hetero.trace
// accept: a million times slower, a day per step. A larger value is a typo, not an experiment:
// 1e300 would only report absurd times.
inline constexpr double kMaxSlowdown = 1e6, kMaxDelayMs = 86400e3;

struct HeteroOptions {
  std::vector<double> slowdown;  // empty = all 1
  double base_ms = 0.0;
  std::string jitter = "none";
  double jitter_ms = 0.0, jitter_prob = 0.1;
  std::string trace;  // path, empty = none
  std::uint64_t seed = 0;
  std::string model = "fixed";                  // fixed | moving | bursty | pareto
  double factor = 4.0;                          // moving, bursty: a slow worker's factor
  int stragglers = 1;                           // moving: workers slow at once
  std::int64_t period = 50;                     // moving, bursty: steps between redraws
  double burst_prob = 0.25;                     // bursty: probability a worker is slow in a period
  double tail_index = 1.5, max_factor = 100.0;  // pareto
  std::vector<double> link_ms;                  // empty = all 0
  bool placement_shuffled = false;              // hetero.placement = shuffled
};

// The slot of hetero.slowdown / hetero.link_ms that `worker` takes: itself, or its image under
// the seeded permutation of placement_shuffled.
int placement_slot(const HeteroOptions& options, int worker, int num_workers);

class Hetero {
 public:
  // `num_workers`: the moving model draws its slow set among them.
  Hetero(const HeteroOptions& options, int worker, int num_workers);
  double slowdown() const { return slowdown_; }
  // The model's factor on this worker's step (1 for fixed).
  double model_factor(std::int64_t step) const;
  // Seconds to add to a step whose compute took `compute_s` (a pure function of the inputs).
  double injected_s(std::int64_t step, double compute_s) const;
  // Seconds every communication of this worker takes longer (its slow link).
  double link_s() const { return link_s_; }

 private:
  HeteroOptions opt_;
  int worker_, num_workers_;
  double slowdown_ = 1.0, link_s_ = 0.0;
  std::vector<std::vector<double>> trace_ms_;
};

// Real time for an injected delay (the MPI run); nothing for s <= 0.
void sleep_seconds(double s);

}  // namespace skew::preduce
