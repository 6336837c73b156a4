// The partial-reduce primitive and preduce_train's sync modes under mpirun.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "lib/preduce/trainer.hpp"
#include "mpi/mpi_process_group.hpp"
#include "mpi/preduce_controller.hpp"
#include "mpi/preduce_gossip.hpp"

using namespace skew;

namespace {
std::shared_ptr<comm::ProcessGroup> world() {
  return std::make_shared<comm::MpiProcessGroup>(MPI_COMM_WORLD);
}
// Worker w's model in round r: distinct per worker, element and round.
float model_value(int w, int round, std::size_t i) {
  return static_cast<float>(w + 1) * 0.5f + 0.01f * static_cast<float>(i) - 0.1f * static_cast<float>(round);
}
}  // namespace

TEST_CASE("group averaging matches the closed form, communicators are cached", "[preduce]") {
  for (const auto& [rule, dedicated] :
       {std::pair{comm::MemberRule::KeepOwn, false}, std::pair{comm::MemberRule::KeepOwn, true},
        std::pair{comm::MemberRule::WeightedMean, false}}) {
    auto w = world();
    if (dedicated && w->size() < 2) continue;
    // Rounds are kept in lockstep (a barrier each) so every member's model and version are
    // known here; an odd number of workers then forms one group of all.
    const int workers = w->size() - (dedicated ? 1 : 0);
    comm::GroupOptions o;
    o.group_size = workers % 2 == 0 ? 2 : workers;
    o.alpha = 0.8;
    o.member_rule = rule;
    comm::PartialReduce pr(w, o, dedicated);
    if (!pr.is_worker()) {
      pr.serve();
      continue;
    }
    const int me = pr.workers()->rank(), n = pr.num_workers();
    std::vector<float> x, scratch;
    constexpr int kRounds = 30;
    for (int round = 0; round < kRounds; ++round) {
      x.resize(5);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = model_value(me, round, i);
      const std::int64_t version = 3 * round + (me % 3);  // members differ in staleness
      const comm::Group g = pr.ready(version);
      REQUIRE(std::find(g.members.begin(), g.members.end(), me) != g.members.end());
      CHECK(static_cast<int>(g.members.size()) == std::min(o.group_size, n));
      // Versions of the members are known here, so the weights can be checked too.
      std::vector<std::int64_t> versions;
      for (int m : g.members) versions.push_back(3 * round + (m % 3));
      const auto expected_w = comm::staleness_weights(versions, 0.8);
      for (std::size_t j = 0; j < g.members.size(); ++j) CHECK(g.weights[j] == Approx(expected_w[j]));
      pr.average_model(x, g, scratch);
      const std::size_t k = g.members.size();
      const std::size_t mine =
          static_cast<std::size_t>(std::find(g.members.begin(), g.members.end(), me) - g.members.begin());
      for (std::size_t i = 0; i < x.size(); ++i) {
        double others = 0.0;
        for (std::size_t j = 0; j < k; ++j)
          if (j != mine) others += g.weights[j] * model_value(g.members[j], round, i);
        const double own = model_value(me, round, i);
        const double weighted_mean = others + g.weights[mine] * own;
        const double expected = k == 1 ? own
                                : rule == comm::MemberRule::WeightedMean
                                    ? weighted_mean
                                    : own / k + (k - 1.0) / k * others / (1.0 - g.weights[mine]);
        CHECK(x[i] == Approx(expected).epsilon(1e-5).margin(1e-6));  // some values cancel to ~0
      }
      pr.workers()->barrier();
    }
    // Pairs of n workers: at most n(n-1)/2 communicators, ever (one for an odd group of all).
    CHECK(pr.workers()->subgroups_created() <= static_cast<std::size_t>(std::max(1, n * (n - 1) / 2)));
    CHECK(pr.workers()->subgroup_cache_size() == pr.workers()->subgroups_created());
  }
}

TEST_CASE("workers that finish at different steps do not hang", "[preduce]") {
  auto w = world();
  comm::GroupOptions o;
  o.group_size = 3;
  o.isolation_bound = 2;
  comm::PartialReduce pr(w, o, false);
  const int me = pr.workers()->rank();
  std::vector<float> x(3, static_cast<float>(me)), scratch;
  std::int64_t version = 0;
  for (int step = 0; step < 4 + 5 * me; ++step) {
    ++version;
    const comm::Group g = pr.ready(version);
    pr.average_model(x, g, scratch);
    version = g.max_version;
  }
  pr.finish();
  SUCCEED("finished");
}

TEST_CASE("AD-PSGD gossip: asynchronous pairwise averages keep the sum and reach consensus", "[preduce]") {
  auto w = world();
  const int me = w->rank(), n = w->size();
  // Distinct models per worker; no gradients, so every averaging keeps the sum over workers
  // and shrinks the spread.
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = model_value(me, 0, i);
  std::int64_t version = 10 * me;
  std::int64_t averages = 0;
  {
    comm::PairwiseGossip gossip(MPI_COMM_WORLD, x.data(), x.size(), &version, 3);
    CHECK(gossip.active() == (me % 2 == 0));
    for (int step = 0; step < 200; ++step) {
      gossip.request();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    gossip.stop();
    averages = gossip.averages();
  }
  if (n > 1) CHECK(averages > 0);
  std::vector<double> sum(x.begin(), x.end()), expected(x.size(), 0.0);
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < x.size(); ++i) expected[i] += model_value(r, 0, i);
  w->allreduce(comm::view(sum), comm::ReduceOp::Sum);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(sum[i] == Approx(expected[i]).epsilon(1e-5));
  // Consensus: every model is close to the mean (the initial spread is 0.5 (n - 1)).
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::abs(x[i] - expected[i] / n) < 0.01);
  // Versions spread by averaging: every worker saw at least its partner's version.
  std::int64_t max_version = version;
  w->allreduce(comm::view(&max_version, 1), comm::ReduceOp::Max);
  CHECK(max_version == 10 * (n - 1));
  if (n > 1) CHECK(version > 10 * me - (me % 2 == 0 ? 0 : 1));
}

TEST_CASE("every sync mode converges on a convex problem under mpirun", "[preduce]") {
  auto w = world();
  // "preduce-rank": the controller on a dedicated rank 0, workers on ranks 1..N-1.
  // "preduce-overlap": the group averaging on a communication thread (preduce.overlap);
  // "preduce-refresh": that, and a stale worker rejoins before its next step (refresh_staleness).
  for (std::string mode :
       {"allreduce", "preduce", "adpsgd", "eager", "local", "preduce-rank", "preduce-overlap", "preduce-refresh"}) {
    const bool dedicated = mode == "preduce-rank";
    if (dedicated && w->size() < 2) continue;
    preduce::TrainOptions o;
    o.mode = mode.starts_with("preduce") ? "preduce" : mode;
    o.dedicated_controller = dedicated;
    o.overlap = mode == "preduce-overlap" || mode == "preduce-refresh";
    o.refresh_staleness = mode == "preduce-refresh" ? 2 : 0;
    o.hidden = {};
    o.rows = 1200;
    o.test_rows = 400;
    o.dim = 8;
    o.classes = 3;
    o.separation = 5.0;
    o.steps = 80;
    o.lr = 0.2;
    o.eval_interval_s = 0.02;
    o.group_size = 2;
    o.eager_deadline_ms = 1.0;
    o.hetero.slowdown = {1, 3};
    o.hetero.base_ms = 0.5;
    // Named by world size too: the np2 and np4 runs may share a directory and run at once.
    const std::string prefix = "test_preduce_metrics_np" + std::to_string(w->size()) + "_";
    if (mode == "preduce") o.metrics = prefix + "%r.jsonl";
    const auto r = preduce::train_mpi(w, o);
    if (mode == "preduce") {
      // One JSONL record per step on every rank, with the partial-reduce fields.
      const std::string path = prefix + std::to_string(w->rank()) + ".jsonl";
      std::ifstream in(path);
      std::string line;
      int lines = 0;
      while (std::getline(in, line)) {
        const auto record = nlohmann::json::parse(line);
        CHECK(record["step"].get<int>() == lines);
        CHECK(record.contains("wait_s"));
        // P = 2, or 1 for a last worker whose peers have all finished.
        CHECK(record["members"].size() >= 1);
        CHECK(record["members"].size() <= 2);
        ++lines;
      }
      CHECK(lines == o.steps);
      std::remove(path.c_str());
    }
    INFO(mode);
    CHECK(r.has_value() == (w->rank() == (dedicated ? 1 : 0)));
    if (r) {
      // The background modes really synchronised (every worker, when there are peers).
      if ((mode == "adpsgd" || o.overlap) && w->size() > 1)
        for (const auto& worker : r->summary["per_worker"]) {
          CHECK(worker["syncs"].get<double>() > 0);
          // Refreshes are a part of the synchronisations, and none without the rule.
          if (o.overlap) CHECK(worker["refreshes"].get<double>() <= worker["syncs"].get<double>());
          if (mode == "preduce-overlap") CHECK(worker["refreshes"].get<double>() == 0);
        }
      CHECK(r->summary["final_accuracy_mean"].get<double>() > 0.9);
      CHECK(r->summary["average_model_accuracy"].get<double>() > 0.9);
    }
  }
}

TEST_CASE("preduce.group_size = 0 measures the ranks' step times, a slow link is slept", "[preduce][hetero]") {
  auto w = world();
  preduce::TrainOptions o;
  o.hidden = {};
  o.rows = 400;
  o.test_rows = 100;
  o.dim = 8;
  o.classes = 3;
  o.steps = 10;
  o.eval_interval_s = 0.05;
  o.hetero.base_ms = 10.0;
  o.hetero.slowdown = {1, 1, 1, 4};  // the last of 4 ranks (np2: none) 4x slower
  o.mode = "preduce";
  o.group_size = 0;
  o.auto_warmup_steps = 5;
  const auto r = preduce::train_mpi(w, o);
  if (r) {
    // np4: 3 fast ranks (10 ms) and one at 40 ms: P = 3; np2: both fast, P = 2. The window is
    // at least 5 steps of the slowest rank.
    CHECK(r->summary["group_size"].get<int>() == (w->size() == 4 ? 3 : 2));
    CHECK(r->summary["auto_warmup_s"].get<double>() >= 5 * (w->size() == 4 ? 0.040 : 0.010));
  }
  // All-reduce waits for the slowest link every step: 10 steps of 2 ms compute plus 20 ms link.
  o.mode = "allreduce";
  o.hetero.base_ms = 2.0;
  o.hetero.slowdown = {1};
  o.hetero.link_ms = {0, 20};
  const auto a = preduce::train_mpi(w, o);
  if (a) CHECK(a->summary["wall_s"].get<double>() >= 10 * 0.022);
  o.mode = "adpsgd";
  CHECK_THROWS_WITH(preduce::train_mpi(w, o), Catch::Contains("hetero.link_ms: not injected into MPI runs"));
}
