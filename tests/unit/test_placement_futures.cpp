// How well any prediction could do (issue 35, per-plan prediction): the generator forks another
// future after the same past, each flexmoe plan is scored on such futures, and the best share any
// one prediction has within 25% of them is what no planner's estimate can beat.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <utility>

#include "lib/placement/simulator.hpp"
#include "tests/unit/two_expert_plan.hpp"

using namespace skew::placement;

namespace {

// The best share by brute force: every x on a fine geometric grid over the values' range.
double brute_best_share(const std::vector<double>& values, double tolerance) {
  double best = 0;
  for (double sign : {1.0, -1.0})
    for (double x = 1e-3; x < 1e3; x *= 1.0001) {
      const auto n = std::count_if(values.begin(), values.end(),
                                   [&](double v) { return std::abs(v / (sign * x) - 1) <= tolerance + 1e-12; });
      best = std::max(best, static_cast<double>(n) / static_cast<double>(values.size()));
    }
  return best;
}

TraceSpec drifting(double drift, double noise) {
  TraceSpec t;
  t.iterations = 30, t.layers = 2, t.experts = 12, t.assignments = 20000;
  t.zipf = 0.8, t.drift = drift, t.noise = noise, t.seed = 7;
  return t;
}

}  // namespace

TEST_CASE("best share within 25%: the best window of values, checked by brute force", "[placement][futures]") {
  CHECK(best_share_within({}, 0.25) == 0);
  // [1, 5/3] holds 1, 1.2, 1.6: x = 4/3.
  CHECK(best_share_within({1, 1.2, 1.6, 3, -1}, 0.25) == Approx(3.0 / 5));
  // Negative values are matched by negative predictions.
  CHECK(best_share_within({-2, -2.5, -3, 1, 10}, 0.25) == Approx(3.0 / 5));
  const std::vector<std::vector<double>> cases = {{0.5, 0.7, 0.8, 0.95, 1.3, 1.31, 2.0, -0.2, 0.0, 4.5},
                                                  {3.0, 3.0, 3.0, 4.9, 5.1, 0.1},
                                                  {-1.0, -1.4, -1.66, 0.2, 0.3, 0.33, 0.41, 0.55}};
  for (const auto& values : cases) {
    INFO("values[0] = " << values[0]);
    CHECK(best_share_within(values, 0.25) == Approx(brute_best_share(values, 0.25)));
    CHECK(best_share_within(values, 0.1) == Approx(brute_best_share(values, 0.1)));
  }
}

TEST_CASE("trace generator: copies continue alike, forks are other futures of the same past", "[placement][futures]") {
  const TraceSpec spec = drifting(0.2, 1.0);
  const RoutingTrace trace = generate_trace(spec);
  TraceGenerator g(spec);
  for (int it = 0; it < 10; ++it) CHECK(g.next() == trace[static_cast<std::size_t>(it)]);
  TraceGenerator copy = g;
  for (int it = 10; it < 30; ++it) CHECK(copy.next() == trace[static_cast<std::size_t>(it)]);
  TraceGenerator a = g.fork(5), b = g.fork(5), c = g.fork(6);
  bool differs = false;
  for (int it = 10; it < 30; ++it) {
    const RoutingCounts fa = a.next();
    CHECK(fa == b.next());
    differs = differs || fa != c.next();
    // Every future routes the same tokens per layer, up to the sampling noise's rounding.
    for (const auto& layer : fa) {
      std::int64_t sum = 0;
      for (auto n : layer) sum += n;
      CHECK(std::abs(static_cast<double>(sum - spec.assignments)) < 10 * std::sqrt(double(spec.assignments)));
    }
  }
  CHECK(differs);
  // Without drift and noise there is one future: every fork is the trace itself.
  const TraceSpec fixed = drifting(0, 0);
  const RoutingTrace fixed_trace = generate_trace(fixed);
  const auto futures = trace_futures(fixed, 3)(12, 8);
  REQUIRE(futures.size() == 3);
  for (const auto& future : futures) {
    REQUIRE(future.size() == 8);
    for (std::size_t i = 0; i < 8; ++i) CHECK(future[i] == fixed_trace[12 + i]);
  }
  // A drifting trace's futures from iteration 12 start from its order at 12: the hottest
  // expert of the first future iteration is one of the trace's hottest few then.
  const auto drifted = trace_futures(spec, 4)(12, 1);
  const auto& now = trace[11].front();
  for (const auto& future : drifted) {
    const auto& first = future.front().front();
    const auto hottest = std::max_element(first.begin(), first.end()) - first.begin();
    std::vector<std::int64_t> sorted = now;
    std::sort(sorted.rbegin(), sorted.rend());
    CHECK(now[static_cast<std::size_t>(hottest)] >= sorted[3]);
  }
}

// The two-expert case of two_expert_plan.hpp, its plan scored on three given futures.
TEST_CASE("flexmoe plans: scored on other futures, against the best any prediction could do", "[placement][futures]") {
  const skew::placement::testing::TwoExpertPlan c;
  SimSetup s = c.setup;
  const double move = c.move;
  const auto gain = [&](double a, double b) { return c.gain(a, b); };
  const auto counts = [](std::int64_t a, std::int64_t b) { return RoutingCounts{{a, b}}; };
  RoutingTrace trace(10, counts(30000, 10000));
  // Futures of the plan at iteration 5, 5 iterations each: unchanged, mildly moved, reversed.
  const std::vector<std::pair<double, double>> futures_ab = {{30000, 10000}, {28000, 12000}, {12000, 28000}};
  std::int64_t asked_iteration = -1, asked_length = -1;
  s.plan_futures = [&](std::int64_t iteration, std::int64_t length) {
    asked_iteration = iteration, asked_length = length;
    std::vector<RoutingTrace> out;
    for (const auto& [a, b] : futures_ab)
      out.emplace_back(static_cast<std::size_t>(length),
                       counts(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b)));
    return out;
  };
  PlanStats stats;
  s.plan_stats = &stats;
  simulate(trace, s);
  REQUIRE(stats.plans.size() == 1);
  const PlanRecord& plan = stats.plans.front();
  CHECK(asked_iteration == 5);
  CHECK(asked_length == 5);
  CHECK(plan.futures == 3);
  const double predicted = 5 * gain(30000, 10000) - move;
  REQUIRE(plan.predicted_net() == Approx(predicted).epsilon(1e-9));
  std::vector<double> nets;
  int within = 0;
  for (const auto& [a, b] : futures_ab) {
    nets.push_back(5 * gain(a, b) - move);
    within += std::abs(nets.back() / predicted - 1) <= 0.25;
  }
  // The unchanged future realises the prediction, the reversed one loses: 2 of 3 within 25%.
  CHECK(within == 2);
  CHECK(plan.futures_within == Approx(within / 3.0));
  CHECK(plan.best_within == Approx(brute_best_share(nets, 0.25)));
  CHECK(plan.to_json().at("best_within").get<double>() == Approx(plan.best_within));
}
