// Which simulated workers are evaluated, and how much each counts in the mean curve: all of them
// when sim.eval_workers >= the workers; else a seeded stratified random sample that always holds
// persistent stragglers (a hetero.slowdown or hetero.link_ms above the fastest worker's): the
// sample's share of stragglers is their share of the workers (at least one of each kind that
// exists), and each evaluated worker weighs its kind's share of the workers over its kind's
// sample size, so the weighted mean estimates the mean over all workers without bias.
// Transient slowness (moving, bursty, pareto) strikes every worker alike: a random sample covers it.
#pragma once
#include <vector>

#include "lib/preduce/options.hpp"

namespace skew::preduce {

struct EvalSample {
  std::vector<int> workers;     // ascending
  std::vector<double> weights;  // same order, sum 1; empty when all are evaluated (equal weights)
};

EvalSample eval_sample(const TrainOptions& opt, int num_workers);

}  // namespace skew::preduce
