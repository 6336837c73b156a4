// Worker-speed heterogeneity, injected as real (or, in the simulator, virtual) time per step:
//   step time = (compute + base) * slowdown[w] + jitter + trace[step][w]
// slowdown: a list repeated over the workers ("1,1,1,4": every 4th worker 4x slower);
// base: a nominal device step time, so that a run on few shared cores still models devices;
// jitter: none | exp (mean jitter_ms) | uniform (0..2*jitter_ms) | spike (jitter_ms with
// probability jitter_prob: the authors' transient straggler); trace: a file whose line s holds
// comma-separated delays in ms for step s, one per worker (extra values are unused; the lines
// repeat over the steps).
// The injected part (step time - compute) is reported separately from compute.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace skew::preduce {

struct HeteroOptions {
  std::vector<double> slowdown;  // empty = all 1
  double base_ms = 0.0;
  std::string jitter = "none";
  double jitter_ms = 0.0, jitter_prob = 0.1;
  std::string trace;  // path, empty = none
  std::uint64_t seed = 0;
};

class Hetero {
 public:
  Hetero(const HeteroOptions& options, int worker);
  double slowdown() const { return slowdown_; }
  // Seconds to add to a step whose compute took `compute_s` (a pure function of the inputs).
  double injected_s(std::int64_t step, double compute_s) const;

 private:
  HeteroOptions opt_;
  int worker_;
  double slowdown_ = 1.0;
  std::vector<std::vector<double>> trace_ms_;
};

}  // namespace skew::preduce
