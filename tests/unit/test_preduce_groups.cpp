// Partial-reduce group formation and weights, without MPI.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "mpi/preduce_groups.hpp"

using skew::comm::Group;
using skew::comm::GroupFormer;
using skew::comm::GroupOptions;

TEST_CASE("staleness weights follow the formula of the reference", "[preduce]") {
  // versions 10, 9, 7: s = 1, 2, 4, T = 4; level 3 is empty and its mass moves to level 1.
  const double a = 0.9, norm = 1.0 - std::pow(a, 4);
  const auto w = skew::comm::staleness_weights({10, 9, 7}, a);
  REQUIRE(w.size() == 3);
  CHECK(w[0] == Approx(((1 - a) + (1 - a) * a * a) / norm).epsilon(1e-12));
  CHECK(w[1] == Approx((1 - a) * a / norm).epsilon(1e-12));
  CHECK(w[2] == Approx((1 - a) * a * a * a / norm).epsilon(1e-12));
  CHECK(w[0] + w[1] + w[2] == Approx(1.0).epsilon(1e-12));
  // Members on one level share its mass; a fresher member weighs more.
  const auto shared = skew::comm::staleness_weights({5, 5, 4}, 0.5);
  CHECK(shared[0] == Approx(shared[1]));
  CHECK(shared[0] == Approx(0.5 / 2 / 0.75));
  CHECK(shared[2] == Approx(0.25 / 0.75));
  // alpha = 1 means equal weights; equal versions too.
  for (double v : skew::comm::staleness_weights({3, 1, 2, 9}, 1.0)) CHECK(v == Approx(0.25));
  for (double v : skew::comm::staleness_weights({4, 4}, 0.9)) CHECK(v == Approx(0.5));
  CHECK_THROWS_AS(skew::comm::staleness_weights({1}, 0.0), skew::Error);
}

TEST_CASE("member update keeps 1/k on itself and (k-1)/k on the weighted others", "[preduce]") {
  const std::vector<std::vector<float>> x = {{1.0f, -2.0f}, {3.0f, 0.5f}, {-1.5f, 4.0f}};
  const std::vector<double> w = {0.5, 0.3, 0.2};
  std::vector<float> s(2, 0.0f);
  for (std::size_t j = 0; j < 3; ++j)
    for (std::size_t i = 0; i < 2; ++i) s[i] += static_cast<float>(w[j] * x[j][i]);
  for (std::size_t me = 0; me < 3; ++me) {
    std::vector<float> mine = x[me];
    skew::comm::apply_member_update(mine.data(), s.data(), 2, w[me], 3, skew::comm::MemberRule::KeepOwn);
    for (std::size_t i = 0; i < 2; ++i) {
      double others = 0.0;
      for (std::size_t j = 0; j < 3; ++j)
        if (j != me) others += w[j] * x[j][i];
      const double expected = x[me][i] / 3.0 + 2.0 / 3.0 * others / (1.0 - w[me]);
      CHECK(mine[i] == Approx(expected).epsilon(1e-5));
    }
  }
  // Equal weights give every member the plain average.
  std::vector<float> a = {2.0f}, sum = {3.0f};  // x = 2, 4: S = 3
  skew::comm::apply_member_update(a.data(), sum.data(), 1, 0.5, 2, skew::comm::MemberRule::KeepOwn);
  CHECK(a[0] == Approx(3.0f));
}

TEST_CASE("weighted_mean members all take the staleness-weighted mean, pairs included", "[preduce]") {
  // A fresh worker (version 9) meets one three versions behind (6): levels 1 and 4, so level 1
  // gets (1-a)(1 + a + a^2) and level 4 (1-a) a^3, over 1 - a^4.
  const double a = 0.9;
  const std::vector<std::int64_t> versions = {9, 6};
  const auto w = skew::comm::staleness_weights(versions, a);
  const double norm = 1.0 - std::pow(a, 4);
  CHECK(w[0] == Approx((1 - a) * (1 + a + a * a) / norm).epsilon(1e-12));
  CHECK(w[1] == Approx((1 - a) * a * a * a / norm).epsilon(1e-12));
  const std::vector<std::vector<float>> x = {{1.0f, -2.0f, 0.25f}, {3.0f, 0.5f, -4.0f}};
  std::vector<float> s(3);
  for (std::size_t i = 0; i < 3; ++i) s[i] = static_cast<float>(w[0] * x[0][i] + w[1] * x[1][i]);
  for (std::size_t me = 0; me < 2; ++me) {
    std::vector<float> mine = x[me];
    skew::comm::apply_member_update(mine.data(), s.data(), 3, w[me], 2, skew::comm::MemberRule::WeightedMean);
    for (std::size_t i = 0; i < 3; ++i) CHECK(mine[i] == Approx(w[0] * x[0][i] + w[1] * x[1][i]).epsilon(1e-6));
    // keep_own would have given the pair's plain mean whatever the weights.
    std::vector<float> reference = x[me];
    skew::comm::apply_member_update(reference.data(), s.data(), 3, w[me], 2, skew::comm::MemberRule::KeepOwn);
    for (std::size_t i = 0; i < 3; ++i) CHECK(reference[i] == Approx(0.5 * (x[0][i] + x[1][i])).epsilon(1e-5));
  }
}

TEST_CASE("the first P ready workers form a group", "[preduce]") {
  GroupOptions o;
  o.num_workers = 5;
  o.group_size = 3;
  GroupFormer f(o);
  f.ready(4, 7, 0.0);
  f.ready(1, 9, 0.1);
  CHECK_FALSE(f.poll(0.2));
  f.ready(2, 9, 0.2);
  f.ready(0, 3, 0.3);
  const auto g = f.poll(0.3);
  REQUIRE(g);
  CHECK(g->members == std::vector<int>{1, 2, 4});
  CHECK(g->max_version == 9);
  CHECK(g->weights[0] == Approx(g->weights[1]));
  CHECK(g->weights[2] < g->weights[0]);
  // Each member's arrival (same order as members) and the closing time, on the caller's clock.
  CHECK(g->ready_at == std::vector<double>{0.1, 0.2, 0.0});
  CHECK(g->closed_at == 0.3);
  CHECK_FALSE(f.poll(0.3));
  CHECK(f.queued() == 1);
  CHECK_THROWS_AS(f.ready(0, 4, 0.4), skew::Error);  // already queued: never in two groups
}

TEST_CASE("deadline, full sync and finished workers close groups without a hang", "[preduce]") {
  GroupOptions o;
  o.num_workers = 4;
  o.group_size = 4;
  o.deadline_s = 0.01;
  o.full_sync_every = 2;
  GroupFormer f(o);
  f.ready(3, 1, 1.0);
  f.ready(0, 1, 1.002);
  CHECK_FALSE(f.poll(1.005));
  REQUIRE(f.next_deadline());
  CHECK(*f.next_deadline() == Approx(1.01));
  const auto late = f.poll(1.01);
  REQUIRE(late);
  CHECK(late->members == std::vector<int>{0, 3});
  CHECK_FALSE(late->full_sync);
  // The second group is a full sync: the deadline does not close it.
  f.ready(1, 1, 2.0);
  CHECK_FALSE(f.poll(5.0));
  f.finished(2);
  f.ready(0, 2, 5.0);
  CHECK_FALSE(f.poll(5.0));
  f.ready(3, 2, 5.0);
  const auto all = f.poll(5.0);
  REQUIRE(all);
  CHECK(all->full_sync);
  CHECK(all->members == std::vector<int>{0, 1, 3});
  // Without a deadline, the last active worker is released alone.
  GroupOptions p;
  p.num_workers = 3;
  p.group_size = 2;
  GroupFormer g(p);
  g.finished(0);
  g.finished(2);
  g.ready(1, 5, 0.0);
  const auto alone = g.poll(0.0);
  REQUIRE(alone);
  CHECK(alone->members == std::vector<int>{1});
  g.finished(1);
  CHECK(g.all_finished());
}

namespace {
// Drives a GroupFormer with workers of very different speeds: worker w needs speed[w] * (1 +
// jitter) time units per step. Returns every group in order.
std::vector<Group> run_schedule(const GroupOptions& o, const std::vector<double>& speed, int steps,
                                std::uint64_t seed) {
  GroupFormer f(o);
  skew::Rng rng(seed, 1);
  const auto n = static_cast<std::size_t>(o.num_workers);
  std::vector<double> ready_at(n);
  std::vector<int> done_steps(n, 0);
  std::vector<char> in_flight(n, 1);  // computing, not queued
  for (std::size_t w = 0; w < n; ++w) ready_at[w] = speed[w] * (1.0 + rng.uniform());
  std::vector<Group> groups;
  std::vector<char> queued(n, 0);
  for (;;) {
    std::size_t next = n;
    for (std::size_t w = 0; w < n; ++w)
      if (in_flight[w] && (next == n || ready_at[w] < ready_at[next])) next = w;
    if (next == n) break;
    const double now = ready_at[next];
    in_flight[next] = 0;
    queued[next] = 1;
    f.ready(static_cast<int>(next), done_steps[next], now);
    while (auto g = f.poll(now)) {
      for (int m : g->members) {
        const auto mu = static_cast<std::size_t>(m);
        REQUIRE(queued[mu]);  // only queued workers are grouped, each once
        queued[mu] = 0;
        if (++done_steps[mu] < steps) {
          in_flight[mu] = 1;
          ready_at[mu] = now + speed[mu] * (1.0 + rng.uniform());
        } else {
          f.finished(m);
        }
      }
      groups.push_back(*g);
    }
  }
  REQUIRE(f.all_finished());
  return groups;
}

// Longest run of consecutive groups (counted from a reset) before their union connects all
// `n` workers, checked with an independent union-find.
int longest_unconnected_run(const std::vector<Group>& groups, int n, std::size_t upto) {
  std::vector<int> parent(static_cast<std::size_t>(n));
  std::iota(parent.begin(), parent.end(), 0);
  const auto find = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)];
    return x;
  };
  int run = 0, longest = 0, sets = n;
  for (std::size_t i = 0; i < upto; ++i) {
    ++run;
    for (int m : groups[i].members) {
      const int a = find(m), b = find(groups[i].members.front());
      if (a != b) {
        parent[static_cast<std::size_t>(a)] = b;
        --sets;
      }
    }
    longest = std::max(longest, run);
    if (sets == 1) {
      std::iota(parent.begin(), parent.end(), 0);
      sets = n;
      run = 0;
    }
  }
  return std::max(longest, run);
}
}  // namespace

TEST_CASE("wait_all: the isolation bound connects every worker within bound + 1 groups", "[preduce]") {
  // Two fast pairs and two slow workers: by FIFO alone the fast ones keep pairing together.
  const std::vector<double> speed = {1.0, 1.0, 1.1, 1.1, 9.0, 13.0, 1.05, 1.05};
  GroupOptions o;
  o.num_workers = 8;
  o.group_size = 2;
  o.isolation_bound = 6;
  o.isolation_rule = skew::comm::IsolationRule::WaitAll;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto groups = run_schedule(o, speed, 400, seed);
    // Before the first worker finishes (then the active set shrinks), count the epochs.
    std::size_t upto = groups.size();
    std::vector<int> seen(8, 0);
    for (std::size_t i = 0; i < groups.size() && upto == groups.size(); ++i)
      for (int m : groups[i].members)
        if (++seen[static_cast<std::size_t>(m)] == 400) upto = i;
    CHECK(longest_unconnected_run(groups, 8, upto) <= o.isolation_bound + 1);
    for (const auto& g : groups) CHECK(std::set<int>(g.members.begin(), g.members.end()).size() == g.members.size());
  }
  // Without the bound the same schedule leaves workers isolated for far longer.
  o.isolation_bound = 0;
  const auto free_groups = run_schedule(o, speed, 400, 1);
  CHECK(longest_unconnected_run(free_groups, 8, free_groups.size() / 2) > 2 * 7);
}

// A checkpoint's controller state: a former restored from another's state (taken when no worker
// is queued) forms the same groups from then on as the former it was taken from (the isolation
// bound's union-find and eager's full-sync rounds included), and not those of a fresh one.
namespace {
// Workers report in a pseudo-random order; one still waiting for its group is skipped.
struct ReadyDriver {
  skew::Rng rng{7, 1};
  std::vector<std::int64_t> version = std::vector<std::int64_t>(6, 0);
  std::vector<char> waiting = std::vector<char>(6, 0);
  double now = 0.0;
  std::vector<Group> formed;
  void attempt(GroupFormer& f) {
    const int w = static_cast<int>(rng.below(6));
    if (waiting[static_cast<std::size_t>(w)]) return;
    waiting[static_cast<std::size_t>(w)] = 1;
    f.ready(w, version[static_cast<std::size_t>(w)]++, now += 1.0);
    while (auto g = f.poll(now)) {
      for (int m : g->members) waiting[static_cast<std::size_t>(m)] = 0;
      formed.push_back(*g);
    }
  }
};
}  // namespace

TEST_CASE("a restored former continues the saved history", "[preduce][resume]") {
  GroupOptions o;
  o.num_workers = 6;
  o.group_size = 2;
  o.isolation_bound = 3;
  o.full_sync_every = 5;
  GroupFormer original(o);
  ReadyDriver before;
  // Saved between full-sync rounds, so a fresh former would place the next one elsewhere.
  for (int i = 0; i < 40 || original.queued() > 0 || original.groups_formed() % 5 == 0; ++i) before.attempt(original);
  const skew::comm::FormerState saved = original.state();
  CHECK(saved.groups_formed == original.groups_formed());
  CHECK(saved.groups_formed >= 10);
  CHECK(original.connecting_groups() > 0);
  GroupFormer restored(o), fresh(o);
  restored.restore(saved);
  ReadyDriver a = before, b = before, c = before;
  a.formed.clear(), b.formed.clear(), c.formed.clear();
  for (int i = 0; i < 60; ++i) a.attempt(original), b.attempt(restored), c.attempt(fresh);
  REQUIRE(a.formed.size() == b.formed.size());
  REQUIRE(a.formed.size() >= 10);
  bool differs_from_fresh = a.formed.size() != c.formed.size();
  for (std::size_t i = 0; i < a.formed.size(); ++i) {
    CHECK(a.formed[i].members == b.formed[i].members);
    CHECK(a.formed[i].full_sync == b.formed[i].full_sync);
    CHECK(a.formed[i].connecting == b.formed[i].connecting);
    CHECK(a.formed[i].weights == b.formed[i].weights);
    if (i < c.formed.size() &&
        (a.formed[i].members != c.formed[i].members || a.formed[i].full_sync != c.formed[i].full_sync ||
         a.formed[i].connecting != c.formed[i].connecting))
      differs_from_fresh = true;
  }
  CHECK(differs_from_fresh);
  CHECK(restored.connecting_groups() == original.connecting_groups());
  // Taken mid-group or restored into a used former, the state would be torn: refused.
  GroupFormer busy(o);
  busy.ready(0, 0, 0.0);
  CHECK_THROWS_WITH(busy.state(), Catch::Contains("while 1 workers wait for a group"));
  CHECK_THROWS_WITH(original.restore(saved), Catch::Contains("already in use"));
  GroupOptions other = o;
  other.num_workers = 4;
  GroupFormer smaller(other);
  CHECK_THROWS_WITH(smaller.restore(saved), Catch::Contains("state of 6 workers restored into one of 4"));
}
