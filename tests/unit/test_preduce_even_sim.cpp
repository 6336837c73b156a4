// An even-handed simulator (issue 37, item 3): the scoring rule, every link busy while it sends,
// latency growing with the group, the controller's measured latency, evaluated workers that
// include the stragglers, and straggler placement random with respect to AD-PSGD's roles.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "apps/preduce_train_options.hpp"
#include "core/config.hpp"
#include "lib/preduce/eval_sample.hpp"
#include "lib/preduce/hetero.hpp"
#include "lib/preduce/trainer.hpp"
#include "lib/preduce/worker.hpp"

using namespace skew::preduce;

TEST_CASE("time to target: the first point whose trailing 4-point window reaches it", "[preduce]") {
  Curve c;
  c.interval = 0.5;
  c.mean_accuracy = {0.5, 0.95, 0.6, 0.9, 0.92, 0.93, 0.95};
  // Point 1 alone crosses 0.9 (the old first-crossing rule: 0.5 s). Windows ending at points
  // 3..6: 0.7375, 0.8425, 0.8375, 0.925: the first at or above 0.9 ends at point 6.
  CHECK(c.time_to(0.9) == Approx(3.0));
  CHECK(c.time_to(0.84) == Approx(2.0));
  CHECK(c.time_to(0.93) == -1.0);
  c.mean_accuracy = {0.99, 0.99, 0.99};  // fewer points than the window: never
  CHECK(c.time_to(0.5) == -1.0);
}

TEST_CASE("mean curve weighs each evaluated worker's series", "[preduce]") {
  const Curve c = mean_curve(1.0, {{0.2, 0.4}, {0.6}}, {0.4, 0.8}, {0.25, 0.75});
  REQUIRE(c.mean_accuracy.size() == 2);
  CHECK(c.mean_accuracy[0] == Approx(0.25 * 0.2 + 0.75 * 0.6));
  CHECK(c.mean_accuracy[1] == Approx(0.25 * 0.4 + 0.75 * 0.8));
}

namespace {
TrainOptions tiny(const std::string& mode, int workers) {
  TrainOptions o;
  o.simulate = true;
  o.mode = mode;
  o.hidden = {};
  o.rows = 600;
  o.test_rows = 200;
  o.dim = 8;
  o.classes = 3;
  o.sim_workers = workers;
  o.sim_compute_ms = 1.0;
  return o;
}
}  // namespace

TEST_CASE("AD-PSGD: a passive worker answers one active worker at a time", "[preduce]") {
  // Three workers: actives 0 and 2 both gossip with the one passive worker 1. A pair takes
  // 10 ms of latency, a step 1 ms: the passive's link, busy for each pair, allows at most one
  // pair per 10 ms of the run (two if each active's link alone were busy): one started per 10 ms
  // up to the end of the run, and one pending request per active worker after it.
  TrainOptions o = tiny("adpsgd", 3);
  o.steps = 200;
  o.sim_latency_ms = 10.0;
  const auto s = simulate(o).summary;
  const double wall = s["wall_s"].get<double>(), pair = 0.010 + 2.0 * 0.5 * (8 * 3 + 3) * 4 / 10e9;
  const auto pairs = s["groups"].get<std::int64_t>();
  CHECK(static_cast<double>(pairs) <= wall / pair + 1.0 + 2.0);
  CHECK(static_cast<double>(pairs) >= wall / pair - 2.0);  // and it is kept busy
}

TEST_CASE("reduction latency grows with the members: log2 (default) or linear hops", "[preduce]") {
  TrainOptions o = tiny("allreduce", 8);
  o.steps = 20;
  o.sim_latency_ms = 0.1;
  const double bytes = (8 * 3 + 3) * 4.0, ring = 2.0 * 7 / 8 * bytes / 10e9;
  // 20 rounds of 1 ms compute plus an 8-member reduction: 3 hops (recursive doubling) or 7 (a ring).
  CHECK(simulate(o).summary["wall_s"].get<double>() == Approx(20 * (0.001 + 3 * 0.0001 + ring)).epsilon(1e-9));
  o.sim_latency_linear = true;
  CHECK(simulate(o).summary["wall_s"].get<double>() == Approx(20 * (0.001 + 7 * 0.0001 + ring)).epsilon(1e-9));
}

TEST_CASE(
    "the controller's latency defaults to the 0.54 ms measured in the real runs, the isolation, latency-growth and "
    "placement keys are read",
    "[preduce][config]") {
  const skew::Schema schema = make_schema();
  const TrainOptions o = read_options(skew::Config::parse_ini_text(schema, "", "x", {}));
  CHECK(o.sim_controller_ms == 0.54);
  CHECK(TrainOptions{}.sim_controller_ms == 0.54);
  CHECK_FALSE(o.sim_latency_linear);
  CHECK_FALSE(o.hetero.placement_shuffled);
  CHECK(o.isolation_rule == skew::comm::IsolationRule::FreshMember);
  const TrainOptions set =
      read_options(skew::Config::parse_ini_text(schema, "", "x",
                                                {"--sim.latency_growth=linear", "--hetero.placement=shuffled",
                                                 "--preduce.isolation_rule=wait_all", "--sim.controller_ms=0.25"}));
  CHECK(set.sim_latency_linear);
  CHECK(set.hetero.placement_shuffled);
  CHECK(set.isolation_rule == skew::comm::IsolationRule::WaitAll);
  CHECK(set.sim_controller_ms == 0.25);
}

TEST_CASE("evaluated workers: a stratified sample that holds the stragglers, weighted to all", "[preduce]") {
  TrainOptions o = tiny("preduce", 16);
  o.sim_eval_workers = 4;
  o.hetero.slowdown = {1, 1, 1, 4};  // stragglers 3, 7, 11, 15 (the old even spacing took 0, 4, 8, 12)
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    o.seed = seed;
    const EvalSample s = eval_sample(o, 16);
    REQUIRE(s.workers.size() == 4);
    CHECK(std::count_if(s.workers.begin(), s.workers.end(), [](int w) { return w % 4 == 3; }) == 1);
    for (double w : s.weights) CHECK(w == Approx(0.25));  // 4/16 over 1, 12/16 over 3
    CHECK(std::set<int>(s.workers.begin(), s.workers.end()).size() == 4);
  }
  // One straggler of 16 still gets a place; it weighs 1/16, the three others 15/16 among them.
  o.hetero.slowdown.assign(16, 1.0);
  o.hetero.slowdown[5] = 3.0;
  const EvalSample one = eval_sample(o, 16);
  const auto at = std::find(one.workers.begin(), one.workers.end(), 5);
  REQUIRE(at != one.workers.end());
  for (std::size_t i = 0; i < 4; ++i) CHECK(one.weights[i] == Approx(one.workers[i] == 5 ? 1.0 / 16 : 15.0 / 16 / 3));
  CHECK(std::accumulate(one.weights.begin(), one.weights.end(), 0.0) == Approx(1.0));
  // A slow link makes a straggler too; enough places evaluate everyone, equally.
  o.hetero.slowdown.clear();
  o.hetero.link_ms = {0, 0, 5, 0, 0, 0, 0, 0};
  const EvalSample link = eval_sample(o, 16);
  CHECK(std::count_if(link.workers.begin(), link.workers.end(), [](int w) { return w % 8 == 2; }) == 1);
  o.sim_eval_workers = 16;
  const EvalSample all = eval_sample(o, 16);
  CHECK(all.workers.size() == 16);
  CHECK(all.weights.empty());
}

TEST_CASE("hetero.placement = shuffled puts stragglers on AD-PSGD's active workers as often as on passive ones",
          "[preduce][hetero]") {
  HeteroOptions h;
  h.slowdown = {1, 1, 1, 4};
  int on_active = 0, total = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    h.seed = seed;
    h.placement_shuffled = false;
    int listed = 0;
    for (int w = 0; w < 16; ++w) listed += Hetero(h, w, 16).slowdown() > 1.0 && w % 2 == 0;
    CHECK(listed == 0);  // the list alone: workers 3, 7, 11, 15, all passive
    h.placement_shuffled = true;
    std::vector<int> slots;
    for (int w = 0; w < 16; ++w) {
      slots.push_back(placement_slot(h, w, 16));
      if (Hetero(h, w, 16).slowdown() > 1.0) {
        ++total;
        on_active += w % 2 == 0;
      }
    }
    std::sort(slots.begin(), slots.end());
    for (int i = 0; i < 16; ++i) CHECK(slots[static_cast<std::size_t>(i)] == i);  // a permutation
  }
  CHECK(total == 400);  // still 4 of 16 slowed, every seed
  // Binomial(400, 1/2) on average for a uniform permutation: 200 +- 10 (sd); allow 4 sd.
  CHECK(std::abs(on_active - 200) <= 40);
}
