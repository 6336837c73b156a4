// The heterogeneity models (lib/preduce/hetero.hpp) against their closed forms over many seeded
// draws, the automatic group size rule (auto_group.hpp) on constructed speed profiles, and the
// simulator's slow links and warm-up against hand-computed virtual times.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "lib/preduce/auto_group.hpp"
#include "lib/preduce/hetero.hpp"
#include "lib/preduce/trainer.hpp"

using namespace skew::preduce;

TEST_CASE("hetero moving: exactly k slow workers per period, each slow k/n of the time", "[preduce][hetero]") {
  HeteroOptions o;
  o.model = "moving";
  o.stragglers = 3;
  o.factor = 4.0;
  o.period = 5;
  o.seed = 7;
  const int n = 8, blocks = 4000;
  std::vector<Hetero> workers;
  for (int w = 0; w < n; ++w) workers.emplace_back(o, w, n);
  std::vector<int> slow_blocks(n, 0);
  for (int b = 0; b < blocks; ++b) {
    int slow = 0;
    for (int w = 0; w < n; ++w) {
      const double f = workers[static_cast<std::size_t>(w)].model_factor(b * o.period);
      REQUIRE((f == 1.0 || f == 4.0));
      // Every step of a period has the period's factor.
      CHECK(workers[static_cast<std::size_t>(w)].model_factor(b * o.period + o.period - 1) == f);
      slow += f > 1.0;
      slow_blocks[static_cast<std::size_t>(w)] += f > 1.0;
    }
    REQUIRE(slow == 3);
  }
  // Binomial(4000, 3/8): standard error 0.0077 of the fraction; 4 of them.
  for (int w = 0; w < n; ++w)
    CHECK(std::abs(slow_blocks[static_cast<std::size_t>(w)] / double(blocks) - 3.0 / 8) < 0.031);
  // The slowness moves: some worker is slow in one period and not in the next.
  int moves = 0;
  for (int b = 0; b + 1 < 100; ++b) moves += workers[0].model_factor(b * 5) != workers[0].model_factor((b + 1) * 5);
  CHECK(moves > 10);
  // Same seed, same sequence; another seed, another one.
  Hetero again(o, 2, n);
  o.seed = 8;
  Hetero other(o, 2, n);
  int differ = 0;
  for (int s = 0; s < 1000; s += 5) {
    CHECK(again.model_factor(s) == workers[2].model_factor(s));
    differ += other.model_factor(s) != workers[2].model_factor(s);
  }
  CHECK(differ > 20);
  o.stragglers = 9;
  CHECK_THROWS_WITH(Hetero(o, 0, n), Catch::Contains("hetero.stragglers = 9 is not in [1, 8]"));
}

TEST_CASE("hetero bursty: slow a fraction burst_prob of the time, bursts of 1/(1-q) periods", "[preduce][hetero]") {
  HeteroOptions o;
  o.model = "bursty";
  o.burst_prob = 0.3;
  o.factor = 5.0;
  o.period = 4;
  o.seed = 3;
  const Hetero h(o, 1, 4);
  const int blocks = 40000;
  int slow = 0, bursts = 0;
  bool was_slow = false;
  for (int b = 0; b < blocks; ++b) {
    const double f = h.model_factor(b * 4 + 3);
    REQUIRE(f == h.model_factor(b * 4));
    const bool now = f == 5.0;
    slow += now;
    bursts += now && !was_slow;
    was_slow = now;
  }
  // Fraction slow 0.3 (standard error 0.0023); a burst lasts geometric(0.7) periods: 1/0.7.
  CHECK(slow / double(blocks) == Approx(0.3).margin(0.01));
  CHECK(slow / double(bursts) == Approx(1.0 / 0.7).epsilon(0.04));
  // Workers burst independently: the fraction of periods both 1 and 2 are slow is q^2.
  const Hetero h2(o, 2, 4);
  int both = 0;
  for (int b = 0; b < blocks; ++b) both += h.model_factor(b * 4) > 1.0 && h2.model_factor(b * 4) > 1.0;
  CHECK(both / double(blocks) == Approx(0.09).margin(0.008));
}

TEST_CASE("hetero pareto: capped mean and tail match the closed form", "[preduce][hetero]") {
  HeteroOptions o;
  o.model = "pareto";
  o.tail_index = 1.5;
  o.max_factor = 50.0;
  o.seed = 11;
  const Hetero h(o, 0, 4);
  const int draws = 200000;
  double sum = 0.0;
  int above2 = 0, capped = 0;
  for (int s = 0; s < draws; ++s) {
    const double f = h.model_factor(s);
    REQUIRE(f >= 1.0);
    REQUIRE(f <= 50.0);
    sum += f;
    above2 += f > 2.0;
    capped += f == 50.0;
  }
  // E[min(X, c)] = 1 + int_1^c x^-a dx = a/(a-1) - c^(1-a)/(a-1); standard deviation 4.2 here,
  // standard error 0.0095.
  const double a = 1.5, c = 50.0;
  CHECK(sum / draws == Approx(a / (a - 1) - std::pow(c, 1 - a) / (a - 1)).margin(0.05));
  CHECK(above2 / double(draws) == Approx(std::pow(2.0, -a)).margin(0.005));
  CHECK(capped / double(draws) == Approx(std::pow(c, -a)).margin(0.0008));
  CHECK(Hetero(o, 0, 4).model_factor(12345) == h.model_factor(12345));
  // The factor multiplies the whole device step: (base + compute) * slowdown * factor - compute.
  o.base_ms = 2.0;
  o.slowdown = {3.0};
  const Hetero scaled(o, 0, 4);
  CHECK(scaled.injected_s(77, 0.001) == Approx(0.003 * 3.0 * h.model_factor(77) - 0.001));
  o.tail_index = 1.0;
  CHECK_THROWS_WITH(Hetero(o, 0, 4), Catch::Contains("hetero.tail_index must be > 1"));
}

TEST_CASE("hetero link_ms repeats over workers, unknown models are refused", "[preduce][hetero]") {
  HeteroOptions o;
  o.link_ms = {0.0, 10.0};
  CHECK(Hetero(o, 2, 4).link_s() == 0.0);
  CHECK(Hetero(o, 3, 4).link_s() == Approx(0.010));
  CHECK(Hetero(o, 3, 4).injected_s(5, 0.001) == 0.0);  // a slow link does not slow the compute
  o.model = "weibull";
  CHECK_THROWS_WITH(Hetero(o, 0, 4), Catch::Contains("hetero.model: unknown model 'weibull'"));
}

TEST_CASE("auto group size, step 1: the workers not persistently slow, clamped to [2, cap]", "[preduce][hetero]") {
  const auto profile = [](std::vector<double> per_worker, double spike_every = 0) {
    std::vector<std::vector<double>> t;
    for (double m : per_worker) {
      std::vector<double> steps;
      for (int s = 0; s < 20; ++s) steps.push_back(spike_every > 0 && s % 5 == 0 ? m * spike_every : m);
      t.push_back(steps);
    }
    return t;
  };
  CHECK(fast_group_size(profile({1, 1, 1, 4}), 1.5, 8) == 3);    // one straggler of 4
  CHECK(fast_group_size(profile({1, 4, 1, 4}), 1.5, 8) == 2);    // two of 4
  CHECK(fast_group_size(profile({4, 4, 4, 1}), 1.5, 8) == 4);    // one fast of 4: the median is slow
  CHECK(fast_group_size(profile({1, 1, 1, 1}), 1.5, 8) == 4);    // homogeneous: everyone
  CHECK(fast_group_size(profile({1, 1, 1, 1.4}), 1.5, 8) == 4);  // 1.4x is within the ratio
  CHECK(fast_group_size(profile({1, 1, 1, 1.6}), 1.5, 8) == 3);
  CHECK(fast_group_size(profile({1, 1, 1, 1}, 10.0), 1.5, 8) == 4);  // spikes in 4 of 20 steps: median
  std::vector<double> sixteen(16, 1.0);
  for (int w = 3; w < 16; w += 4) sixteen[static_cast<std::size_t>(w)] = 4.0;
  CHECK(fast_group_size(profile(sixteen), 1.5, 8) == 8);  // 12 fast, capped
  CHECK(fast_group_size(profile(sixteen), 1.5, 16) == 12);
  CHECK(fast_group_size(profile({1, 5, 5, 5, 5}), 1.5, 8) == 5);  // everyone at the median
  // A slow majority is the typical worker: all within the ratio of it, P = all.
  CHECK(fast_group_size(profile({1, 1, 5, 5, 5}), 1.5, 8) == 5);
  CHECK(fast_group_size(profile({1, 1, 1, 5, 5}), 1.5, 8) == 3);
}

namespace {
TrainOptions small_problem(const std::string& mode) {
  TrainOptions o;
  o.simulate = true;
  o.mode = mode;
  o.hidden = {};
  o.rows = 600;
  o.test_rows = 200;
  o.dim = 8;
  o.classes = 3;
  o.steps = 20;
  o.sim_workers = 8;
  o.sim_compute_ms = 0.5;
  o.sim_latency_ms = 0.1;
  o.hetero.base_ms = 5.0;
  o.hetero.slowdown = {1, 1, 1, 4};
  return o;
}
}  // namespace

TEST_CASE("auto group size, step 2: the most deviation removed per second", "[preduce][hetero]") {
  const std::vector<std::vector<double>> sixteen(16, std::vector<double>(5, 1.0));  // 1 s steps
  // Free communication: 32 (P-1) / (P (31 + P)) (cycle 1 + (P-1)/32 s) peaks between 6 and 7
  // (P = 1 + sqrt(32)); 7 is higher.
  CHECK(auto_group_size(sixteen, 1.5, 16, GroupCost{}) == 7);
  // A 3 s controller round trip per group lengthens every P's cycle alike, so the wait for the
  // members weighs less: 32 (P-1) / (P (127 + P)) peaks at P = 1 + sqrt(128) = 12.3.
  CHECK(auto_group_size(sixteen, 1.5, 16, GroupCost{3.0, 0.0, 0.0, false}) == 12);
  // Latency hops growing with P pull it down: 0.2 s a hop, ceil(log2 P) hops: P = 4.
  CHECK(auto_group_size(sixteen, 1.5, 16, GroupCost{0.0, 0.2, 0.0, false}) == 4);
  CHECK(fast_group_size(sixteen, 1.5, 16) == 16);  // the former rule took the bound every time
  const GroupCost ring{0.5, 0.1, 1.0, true};
  CHECK(ring.of(4) == Approx(0.5 + 3 * 0.1 + 1.5));
  CHECK(GroupCost{0.5, 0.1, 1.0, false}.of(5) == Approx(0.5 + 3 * 0.1 + 1.6));
}

TEST_CASE("simulator: a slow link adds its delay to every all-reduce, auto P from the warm-up", "[preduce][hetero]") {
  TrainOptions o = small_problem("allreduce");
  const double base = simulate(o).summary["wall_s"].get<double>();
  // 20 rounds, each waiting for the straggler: (0.5 + 5) * 4 ms, plus the reduction (8 members:
  // log2 8 = 3 hops of latency).
  CHECK(base == Approx(20 * (0.022 + 3 * 0.0001 + 2.0 * 7 / 8 * (8 * 3 + 3) * 4 / 10e9)).epsilon(1e-9));
  o.hetero.link_ms = {0, 0, 10};
  CHECK(simulate(o).summary["wall_s"].get<double>() == Approx(base + 20 * 0.010).epsilon(1e-9));
  // Partial reduce with P = 0: 6 of 8 workers are fast; warm-up = 20 steps of the straggler,
  // 0.5 + (0.5 + 5) * 4 - 0.5 ms each.
  o.hetero.link_ms.clear();
  o.mode = "preduce";
  o.group_size = 0;
  const RunResult r = simulate(o);
  // 6 fast workers (5.5 ms) bound P; arrivals L = 6/5.5 + 2/22 per ms, a group
  // costs 0.54 ms of controller and ceil(log2 P) * 0.1 ms: (1 - 1/P) / (5.5 + (P-1)/(2L) + C(P))
  // is 0.0762, 0.0941, 0.0999, 0.0996, 0.0986 for P = 2..6, so P = 4.
  CHECK(r.summary["group_size"].get<int>() == 4);
  o.overlap = true;  // overlapped: the same rule (its average is the round trip old)
  CHECK(simulate(o).summary["group_size"].get<int>() == 4);
  o.overlap = false;
  CHECK(r.summary["auto_warmup_s"].get<double>() == Approx(20 * 0.022).epsilon(1e-9));
  o.auto_max_group = 4;
  CHECK(simulate(o).summary["group_size"].get<int>() == 4);
}
