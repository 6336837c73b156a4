// The planner does no harm (issue 35, item 2): on a drift-free trace flexmoe gets within 10% of
// the ideal, each plan's realised gain is what it predicted when the counts do not change and the
// counterfactual of the counts that followed when they do, and replica lifetimes and change rates
// are counted.
#include <algorithm>
#include <catch2/catch.hpp>
#include <utility>

#include "lib/placement/simulator.hpp"
#include "tests/unit/two_expert_plan.hpp"

using namespace skew::placement;

namespace {

// configs/sim.ini's cluster: 8 A100-class GPUs on one node, d_model 1024, d_ff 4096.
SimSetup one_node(Overlap overlap) {
  SimSetup s;
  s.constants = {.gemm_flops = 100e12,
                 .nvlink_bandwidth = 150e9,
                 .alltoall_bandwidth = 25e9,
                 .allreduce_bandwidth = 25e9,
                 .gpus_per_node = 8,
                 .alltoall_latency = 20e-6,
                 .stage_latency = 20e-6};
  s.shape = {.params = 2 * 1024 * 4096,
             .hidden_dim = 1024,
             .activation_bytes = 2,
             .grad_bytes_per_param = 2,
             .state_bytes_per_param = 14};
  s.gpus = 8;
  s.schedule = {overlap, overlap == Overlap::Pipelined ? 4 : 1};
  s.flexmoe.smoothing = 0.5;
  s.flexmoe.planner.interval = 10;
  s.flexmoe.planner.variance_per_token = 1.0 / 3;  // (1 - 0.5) / (1 + 0.5)
  return s;
}

TraceSpec drift_free(double zipf, double noise) {
  TraceSpec t;
  t.iterations = 60, t.layers = 2, t.experts = 16, t.assignments = 8 * 4096 * 2;
  t.zipf = zipf, t.drift = 0, t.noise = noise, t.seed = 3;
  return t;
}

double mean_from(const std::vector<double>& v, std::size_t first) {
  double sum = 0;
  for (std::size_t i = first; i < v.size(); ++i) sum += v[i];
  return sum / static_cast<double>(v.size() - first);
}

}  // namespace

TEST_CASE("flexmoe on a drift-free trace: within 10% of the ideal once planned", "[placement][plans]") {
  for (Overlap overlap : {Overlap::None, Overlap::Pipelined})
    for (double zipf : {0.6, 1.0}) {
      SimSetup s = one_node(overlap);
      PlanStats stats;
      s.plan_stats = &stats;
      const auto r = simulate(generate_trace(drift_free(zipf, 1.0)), s);
      REQUIRE(!stats.plans.empty());
      // After the warm-up (5 observations) and the first plan's move (iteration 5).
      const auto first = static_cast<std::size_t>(stats.plans.front().iteration + 1);
      INFO("overlap " << overlap_name(overlap) << ", zipf " << zipf);
      CHECK(first == 6);
      CHECK(mean_from(r[3].step_seconds, first) <= 1.10 * mean_from(r[4].step_seconds, first));
      CHECK(mean_from(r[3].step_seconds, first) < 0.8 * mean_from(r[0].step_seconds, first));  // static
    }
}

TEST_CASE("flexmoe plans: realised gain equals the predicted one on unchanging counts", "[placement][plans]") {
  SimSetup s = one_node(Overlap::Pipelined);
  s.flexmoe.planner.noise_z = 0;  // exact counts
  PlanStats stats;
  s.plan_stats = &stats;
  simulate(generate_trace(drift_free(1.0, 0.0)), s);
  REQUIRE(!stats.plans.empty());
  const PlanRecord& first = stats.plans.front();
  CHECK(first.iteration == 5);
  CHECK(first.added > 0);
  CHECK(first.predicted_gain > 0);
  CHECK(first.realised_iterations > 0);
  // The estimate is the counts themselves (smoothing of equal values): the same seconds.
  CHECK(first.realised_gain == Approx(first.predicted_gain).epsilon(1e-9));
  CHECK(stats.iterations == 60);
  // Replicas added and removed per 100 iterations, from the plans' own counts.
  double moves = 0;
  for (const auto& p : stats.plans) moves += p.added + p.removed;
  CHECK(stats.changes_per_100() == Approx(100 * moves / 60));
}

// The two-expert case of two_expert_plan.hpp, hand-computed.
TEST_CASE("flexmoe plans: the realised gain is the counterfactual of the counts that followed", "[placement][plans]") {
  const skew::placement::testing::TwoExpertPlan c;
  SimSetup s = c.setup;
  const double move = c.move;
  const auto before = [&](double a, double b) { return c.before(a, b); };
  const auto after = [&](double a, double b) { return c.after(a, b); };
  // Five warm-up iterations at (30000, 10000), then the plan's five iterations (the trace ends
  // before the next plan), one with the skew reversed.
  RoutingTrace trace(5, RoutingCounts{{30000, 10000}});
  const std::vector<std::pair<double, double>> following = {
      {26000, 14000}, {30000, 10000}, {12000, 20000}, {34000, 6000}, {20000, 20000}};
  for (const auto& [a, b] : following)
    trace.push_back(RoutingCounts{{static_cast<std::int64_t>(a), static_cast<std::int64_t>(b)}});
  PlanStats stats;
  s.plan_stats = &stats;
  const auto r = simulate(trace, s);
  REQUIRE(stats.plans.size() == 1);
  const PlanRecord& plan = stats.plans.front();
  CHECK(plan.iteration == 5);
  CHECK(plan.added == 1);
  CHECK(plan.removed == 0);
  CHECK(plan.realised_iterations == 5);
  double realised = 0;
  for (const auto& [a, b] : following) realised += before(a, b) - after(a, b);
  const double predicted = before(30000, 10000) - after(30000, 10000);
  CHECK(plan.change_seconds == Approx(move).epsilon(1e-9));
  CHECK(plan.predicted_change_seconds == Approx(move).epsilon(1e-9));
  CHECK(plan.predicted_gain == Approx(predicted).epsilon(1e-9));
  CHECK(plan.realised_gain == Approx(realised / 5).epsilon(1e-9));
  CHECK(plan.predicted_net() == Approx(5 * predicted - move).epsilon(1e-9));
  CHECK(plan.realised_net() == Approx(realised - move).epsilon(1e-9));
  // The same steps as flexmoe's own series: the plan's iteration pays the move.
  CHECK(r[3].step_seconds[5] == Approx(after(26000, 14000) + move).epsilon(1e-9));
  CHECK(r[3].step_seconds[7] == Approx(after(12000, 20000)).epsilon(1e-9));
  CHECK(r[0].step_seconds[7] == Approx(before(12000, 20000)).epsilon(1e-9));
}

TEST_CASE("plan stats: median replica lifetime", "[placement][plans]") {
  PlanStats stats;
  CHECK(stats.median_lifetime() == -1);
  stats.lifetimes = {30, 10, 20};
  CHECK(stats.median_lifetime() == 20);
  stats.lifetimes.push_back(40);
  CHECK(stats.median_lifetime() == 25);
}
