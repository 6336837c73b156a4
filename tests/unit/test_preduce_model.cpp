// preduce_train's model, data, heterogeneity and simulator.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "lib/preduce/data.hpp"
#include "lib/preduce/mlp.hpp"
#include "lib/preduce/sync/preduce.hpp"
#include "lib/preduce/task.hpp"
#include "lib/preduce/trainer.hpp"

using namespace skew::preduce;

TEST_CASE("MLP backward matches central finite differences", "[preduce]") {
  Mlp mlp({5, 7, 4, 3});
  std::vector<float> params = mlp.init(3);
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i] += 0.05f * std::sin(static_cast<float>(i));  // non-zero biases
  const Dataset d = make_clusters(6, 5, 3, 2.0, 9, 0);
  std::vector<float> grad;
  const double loss = mlp.loss_and_grad(params, d.x.data(), d.y.data(), 6, grad);
  REQUIRE(loss > 0.0);
  REQUIRE(grad.size() == mlp.num_params());
  double max_err = 0.0, max_grad = 0.0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<float> p = params;
    const float h = 1e-2f;
    p[i] = params[i] + h;
    const double up = mlp.loss(p, d.x.data(), d.y.data(), 6);
    p[i] = params[i] - h;
    const double down = mlp.loss(p, d.x.data(), d.y.data(), 6);
    const double numeric = (up - down) / (2.0 * h);
    max_err = std::max(max_err, std::abs(numeric - grad[i]));
    max_grad = std::max(max_grad, std::abs(numeric));
  }
  REQUIRE(max_grad > 1e-2);
  CHECK(max_err < 2e-2 * max_grad);
}

TEST_CASE("heterogeneity: slowdown repeats over workers, trace rows add per step", "[preduce]") {
  const std::string trace = "test_preduce_trace.csv";
  std::ofstream(trace) << "1,0,0,2\n# comment\n3,0,0,4\n";
  HeteroOptions o;
  o.slowdown = {1.0, 4.0};
  o.base_ms = 2.0;
  o.trace = trace;
  Hetero w3(o, 3, 4);
  CHECK(w3.slowdown() == 4.0);
  // (compute + base) * 4 - compute + trace[step % 2][3]
  CHECK(w3.injected_s(0, 0.001) == Approx((0.001 + 0.002) * 4 - 0.001 + 0.002));
  CHECK(w3.injected_s(1, 0.001) == Approx((0.001 + 0.002) * 4 - 0.001 + 0.004));
  // A row short of a worker's value is a trace for fewer workers: refused naming the line.
  std::ofstream(trace) << "1,2\n3\n";
  CHECK(Hetero(o, 0, 4).injected_s(1, 0.0) == Approx(0.002 + 0.003));
  CHECK_THROWS_WITH(Hetero(o, 1, 4), Catch::Contains("hetero.trace: " + trace + ":2: 1 delays, none for worker 1"));
  // A field is one finite delay in [0, a day], as strictly as a config value: "2x" is not 2.
  for (const auto& [line, value] : std::vector<std::pair<std::string, std::string>>{{"0,inf", "2 'inf'"},
                                                                                    {"0,1e300", "2 '1e300'"},
                                                                                    {"1,2x", "2 '2x'"},
                                                                                    {"nan,1", "1 'nan'"},
                                                                                    {"0,-1", "2 '-1'"},
                                                                                    {"0,", "2 ''"},
                                                                                    {"0,1e400", "2 '1e400'"}}) {
    INFO(line);
    std::ofstream(trace) << "0,1\n" << line << "\n";
    CHECK_THROWS_WITH(Hetero(o, 0, 2), Catch::Contains("hetero.trace: " + trace + ":2: value " + value +
                                                       " is not a delay in ms: expected a finite number in [0, "));
  }
  std::ofstream(trace) << " 0.5 ,+2\n";  // blanks around a number and a plus sign are numbers
  // (0 + base 2 ms) * slowdown + the trace's delay
  CHECK(Hetero(o, 0, 2).injected_s(0, 0.0) == Approx(0.002 * 1 + 0.0005));
  CHECK(Hetero(o, 1, 2).injected_s(0, 0.0) == Approx(0.002 * 4 + 0.002));
  o.trace.clear();
  o.jitter = "exp";
  o.jitter_ms = 1.0;
  Hetero w0(o, 0, 4);
  double mean = 0.0;
  for (int s = 0; s < 4000; ++s) mean += (w0.injected_s(s, 0.0) - 0.002) / 4000;
  CHECK(mean == Approx(0.001).epsilon(0.1));
  CHECK(w0.injected_s(5, 0.0) == w0.injected_s(5, 0.0));
  o.jitter = "pareto";
  CHECK_THROWS_AS(Hetero(o, 0, 4), skew::Error);
  std::remove(trace.c_str());
}

TEST_CASE("CSV loader names the file and line of bad input", "[preduce]") {
  const std::string path = "test_preduce_bad.csv";
  std::ofstream(path) << "1,0.5,0.25\n0,0.1\n";
  try {
    load_csv(path, 2);
    FAIL("no error");
  } catch (const skew::Error& e) {
    CHECK(std::string(e.what()).find(path + ":2") != std::string::npos);
  }
  std::remove(path.c_str());
}

namespace {
TrainOptions convex_problem(const std::string& mode) {
  TrainOptions o;
  o.simulate = true;
  o.mode = mode;
  o.hidden = {};  // multinomial logistic regression: convex
  o.rows = 1200;
  o.test_rows = 400;
  o.dim = 8;
  o.classes = 3;
  o.separation = 5.0;
  o.steps = 120;
  o.lr = 0.2;
  o.eval_interval_s = 0.01;
  o.sim_workers = 6;
  o.group_size = 3;
  o.hetero.slowdown = {1, 1, 1, 1, 1, 4};
  o.hetero.jitter = "exp";
  o.hetero.jitter_ms = 0.3;
  return o;
}
}  // namespace

TEST_CASE("every sync mode converges on a convex problem in the simulator", "[preduce]") {
  for (const std::string mode : {"allreduce", "preduce", "adpsgd", "eager", "local"}) {
    for (const char* variant : {"", "gradient", "overlap"}) {
      if (*variant && mode != "preduce") continue;
      TrainOptions o = convex_problem(mode);
      o.reduce_gradient = std::string(variant) == "gradient";
      o.overlap = std::string(variant) == "overlap";
      const RunResult r = simulate(o);
      INFO(mode << " " << variant);
      if (mode == "adpsgd" || o.overlap) CHECK(r.summary["groups"].get<std::int64_t>() > 0);
      CHECK(r.summary["final_accuracy_mean"].get<double>() > 0.9);
      CHECK(r.summary["average_model_accuracy"].get<double>() > 0.9);
      REQUIRE(r.curve.mean_accuracy.size() > 2);
      CHECK(r.curve.mean_accuracy.front() < r.curve.mean_accuracy.back());
    }
  }
}

TEST_CASE("the simulator is deterministic for a seed and partial reduce beats all-reduce under a straggler",
          "[preduce]") {
  TrainOptions o = convex_problem("preduce");
  o.isolation_bound = 4;
  const RunResult a = simulate(o), b = simulate(o);
  CHECK(a.summary.dump() == b.summary.dump());
  CHECK(a.average_model == b.average_model);
  o.seed = 2;
  CHECK(simulate(o).average_model != a.average_model);
  // With one worker 4x slower, all-reduce waits for it every step; partial reduce does not.
  o.seed = 1;
  o.mode = "allreduce";
  const RunResult sync = simulate(o);
  CHECK(a.summary["groups"].get<std::int64_t>() > 0);
  CHECK(a.summary["mean_idle_fraction"].get<double>() < sync.summary["mean_idle_fraction"].get<double>());
}

TEST_CASE("mean curve pads shorter series with the final accuracy", "[preduce]") {
  const Curve c = mean_curve(0.5, {{0.1, 0.5, 0.9}, {0.3}}, {0.9, 0.7});
  REQUIRE(c.mean_accuracy.size() == 3);
  CHECK(c.mean_accuracy[1] == Approx(0.6));
  CHECK(c.time_to(0.55) == -1.0);  // 3 points: shorter than the scoring window
  const Curve longer = mean_curve(0.5, {{0.1, 0.5, 0.9, 0.9, 0.9}, {0.3}}, {0.9, 0.7});
  // Means 0.2, 0.6, 0.8, 0.8, 0.8: windows ending at points 3 and 4 average 0.6 and 0.75.
  CHECK(longer.time_to(0.75) == Approx(2.0));
  CHECK(longer.time_to(0.76) == -1.0);
}

TEST_CASE("partial reduce trains the wide models (LR, FM) on synthetic CTR data", "[preduce]") {
  for (const char* kind : {"lr", "fm"}) {
    TrainOptions o;
    o.simulate = true;
    o.mode = "preduce";
    o.source = "synthetic_ctr";
    o.model_kind = kind;
    o.ctr_features = 2000;
    o.rows = 4000;
    o.test_rows = 1000;
    o.steps = 150;
    o.batch = 64;
    o.lr = 0.2;
    o.eval_interval_s = 0.05;
    o.sim_workers = 4;
    o.hetero.slowdown = {1, 1, 1, 4};
    const RunResult r = simulate(o);
    INFO(kind);
    CHECK(r.summary["metric"] == "auc");
    REQUIRE(r.curve.mean_accuracy.size() > 2);
    CHECK(r.curve.mean_accuracy.back() > r.curve.mean_accuracy.front() + 0.05);
    CHECK(r.summary["average_model_accuracy"].get<double>() > 0.6);
  }
}

TEST_CASE("refresh_budget: s - 1 rejoins when a step's group found the worker refresh_staleness stale", "[preduce]") {
  TrainOptions o = convex_problem("preduce");
  o.overlap = true;
  o.refresh_staleness = 3;
  // s = max_version - ready_version + 1
  CHECK(refresh_budget(o, 10, 8) == 2);   // s = 3
  CHECK(refresh_budget(o, 10, 2) == 8);   // s = 9
  CHECK(refresh_budget(o, 10, 9) == 0);   // s = 2, below the threshold
  CHECK(refresh_budget(o, 10, 10) == 0);  // the freshest member, s = 1
  o.refresh_staleness = 2;
  CHECK(refresh_budget(o, 10, 9) == 1);
  o.refresh_staleness = 0;  // off
  CHECK(refresh_budget(o, 10, 2) == 0);
  o.refresh_staleness = 3;
  o.overlap = false;  // the blocking protocol never rejoins without a step
  CHECK(refresh_budget(o, 10, 2) == 0);
}

TEST_CASE("refresh: only the straggler rejoins between its steps, and it syncs more often", "[preduce]") {
  // Constructed schedule: 3 workers, the last 4x slower, no jitter, pairs. The two fast workers
  // step in lockstep and pair at equal versions (s = 1), so they never refresh; the straggler
  // reports ready with version v + 1 after each 4-step-long step while its partners are near
  // v + 4, so it is stale and rejoins at once.
  TrainOptions o = convex_problem("preduce");
  o.sim_workers = 3;
  o.group_size = 2;
  o.hetero.slowdown = {1, 1, 4};
  o.hetero.jitter = "none";
  o.isolation_bound = 0;
  o.overlap = true;
  o.steps = 100000;
  o.max_seconds = 0.4;  // virtual: 1 ms per fast step
  o.sim_compute_ms = 1.0;
  const RunResult off = simulate(o);
  o.refresh_staleness = 3;
  const RunResult on = simulate(o);
  const auto r_off = off.summary["refreshes_per_worker"].get<std::vector<std::int64_t>>();
  const auto r_on = on.summary["refreshes_per_worker"].get<std::vector<std::int64_t>>();
  INFO(on.summary.dump());
  for (std::int64_t r : r_off) CHECK(r == 0);
  CHECK(r_on[0] == 0);
  CHECK(r_on[1] == 0);
  // About 100 straggler steps in 0.4 s; it refreshes after (nearly) each of them.
  CHECK(r_on[2] >= 90);
  // Each refresh is one more ready in the queue, and pairs close one group per two readies.
  const auto extra_groups =
      static_cast<double>(on.summary["groups"].get<std::int64_t>() - off.summary["groups"].get<std::int64_t>());
  CHECK(extra_groups == Approx(static_cast<double>(r_on[2]) / 2.0).margin(3.0));
  CHECK(on.summary["final_accuracy_mean"].get<double>() > 0.9);
}

TEST_CASE("data.eval_rows: the test accuracy is over the first n test rows only", "[preduce]") {
  TrainOptions o;
  o.hidden = {8};
  o.rows = 200, o.test_rows = 300, o.dim = 6, o.classes = 3, o.separation = 1.0;
  const std::unique_ptr<Task> task = make_task(o, 2);
  const std::vector<float> params = task->init();
  // The reference: each of the first n rows of the same generated test set scored alone.
  const Dataset test = make_clusters(o.test_rows, o.dim, o.classes, o.separation, o.seed, 1);
  Mlp mlp({o.dim, 8, o.classes});
  const auto first_rows_accuracy = [&](int n) {
    double correct = 0;
    for (int r = 0; r < n; ++r) correct += mlp.accuracy(params, test.row(r), &test.y[std::size_t(r)], 1);
    return correct / n;
  };
  CHECK(task->metric(params) == Approx(first_rows_accuracy(o.test_rows)).margin(1e-12));
  for (const int n : {1, 37, 150}) {
    o.eval_rows = n;
    CHECK(make_task(o, 2)->metric(params) == Approx(first_rows_accuracy(n)).margin(1e-12));
  }
  // The cut is seen.
  CHECK(first_rows_accuracy(37) != first_rows_accuracy(o.test_rows));
  // More rows than there are: all of them.
  o.eval_rows = o.test_rows + 1;
  CHECK(make_task(o, 2)->metric(params) == Approx(first_rows_accuracy(o.test_rows)).margin(1e-12));
  // Refused, not silently ignored, where it does not apply.
  o.model_kind = "fm", o.source = "synthetic_ctr";
  CHECK_THROWS_WITH(make_task(o, 2), Catch::Contains("data.eval_rows = 301 applies to model.kind = mlp"));
}
