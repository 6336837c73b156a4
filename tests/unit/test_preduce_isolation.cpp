// The isolation rule (issue 37, item 1): once the isolation bound is reached, one worker that
// stalls under a heavy tail must not stop the others' averaging (fresh_member), while no worker
// outside the main component goes more than the bound's groups without joining another one.
// Checked on a blocking schedule driven here, against a union-find of the test's own.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "core/rng.hpp"
#include "mpi/preduce_groups.hpp"

using skew::comm::Group;
using skew::comm::GroupFormer;
using skew::comm::GroupOptions;
using skew::comm::IsolationRule;

namespace {

constexpr int kWorkers = 16, kStalled = 5;
constexpr double kStallStart = 40.0, kStall = 400.0, kHorizon = 600.0;

// A blocking schedule up to kHorizon: worker w's step takes step_time(w, now) time units and a
// grouped member starts its next step when its group closes. Returns the groups in order.
template <typename StepTime>
std::vector<Group> blocking_schedule(const GroupOptions& o, StepTime step_time) {
  GroupFormer f(o);
  const int n = o.num_workers;
  std::vector<double> ready_at(static_cast<std::size_t>(n));
  std::vector<char> computing(static_cast<std::size_t>(n), 1);
  std::vector<std::int64_t> version(static_cast<std::size_t>(n), 0);
  for (int w = 0; w < n; ++w) ready_at[static_cast<std::size_t>(w)] = step_time(w, 0.0);
  std::vector<Group> groups;
  for (;;) {
    int next = -1;
    for (int w = 0; w < n; ++w)
      if (computing[static_cast<std::size_t>(w)] &&
          (next < 0 || ready_at[static_cast<std::size_t>(w)] < ready_at[static_cast<std::size_t>(next)]))
        next = w;
    if (next < 0 || ready_at[static_cast<std::size_t>(next)] > kHorizon) break;
    const double now = ready_at[static_cast<std::size_t>(next)];
    computing[static_cast<std::size_t>(next)] = 0;
    f.ready(next, ++version[static_cast<std::size_t>(next)], now);
    while (auto g = f.poll(now)) {
      for (int m : g->members) {
        computing[static_cast<std::size_t>(m)] = 1;
        ready_at[static_cast<std::size_t>(m)] = now + step_time(m, now);
      }
      groups.push_back(*g);
    }
  }
  return groups;
}

// Every step takes a Pareto(1.5) draw (scale 1, capped at 100) time units; the step of worker
// kStalled that starts first after kStallStart takes kStall more.
std::vector<Group> heavy_tail_schedule(const GroupOptions& o) {
  skew::Rng rng(11, 3);
  bool stalled = false;
  return blocking_schedule(o, [&](int w, double now) {
    const double pareto = std::min(100.0, std::pow(1.0 - rng.uniform(), -1.0 / 1.5));
    if (w != kStalled || stalled || now < kStallStart) return pareto;
    stalled = true;
    return pareto + kStall;
  });
}

// The test's own union-find over the groups since its last reset (when it is one set).
struct Components {
  int n;
  std::vector<int> parent = std::vector<int>(static_cast<std::size_t>(n));
  int since_reset = 0;
  explicit Components(int workers) : n(workers) { std::iota(parent.begin(), parent.end(), 0); }
  int root(int x) const {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)];
    return x;
  }
  // The largest component's root (ties: the one holding the lowest worker id).
  int main() const {
    std::vector<int> size(static_cast<std::size_t>(n), 0);
    for (int w = 0; w < n; ++w) ++size[static_cast<std::size_t>(root(w))];
    int best = root(0);
    for (int w = 1; w < n; ++w)
      if (size[static_cast<std::size_t>(root(w))] > size[static_cast<std::size_t>(best)]) best = root(w);
    return best;
  }
  bool joins(const Group& g) const {
    return std::any_of(g.members.begin(), g.members.end(), [&](int m) { return root(m) != root(g.members[0]); });
  }
  void add(const Group& g) {
    for (int m : g.members) parent[static_cast<std::size_t>(root(m))] = root(g.members[0]);
    ++since_reset;
    int sets = 0;
    for (int w = 0; w < n; ++w) sets += root(w) == w;
    if (sets == 1) *this = Components(n);
  }
};

// Per worker, the longest run of its groups that it took outside the main component without
// joining another one.
std::vector<int> longest_unjoined(const std::vector<Group>& groups, int n) {
  Components uf(n);
  std::vector<int> run(static_cast<std::size_t>(n), 0), longest(static_cast<std::size_t>(n), 0);
  for (const auto& g : groups) {
    const bool joins = uf.joins(g);
    for (int m : g.members) {
      auto& r = run[static_cast<std::size_t>(m)];
      r = (joins || uf.root(m) == uf.main()) ? 0 : r + 1;
      longest[static_cast<std::size_t>(m)] = std::max(longest[static_cast<std::size_t>(m)], r);
    }
    uf.add(g);
  }
  return longest;
}

GroupOptions options(IsolationRule rule) {
  GroupOptions o;
  o.num_workers = kWorkers;
  o.group_size = 4;
  o.isolation_bound = 10;
  o.isolation_rule = rule;
  return o;
}

std::size_t groups_during_stall(const std::vector<Group>& groups) {
  return static_cast<std::size_t>(std::count_if(groups.begin(), groups.end(), [](const Group& g) {
    return g.closed_at > kStallStart + 3.0 && g.closed_at < kStallStart + kStall;
  }));
}

}  // namespace

TEST_CASE("fresh_member: a stalled worker stalls no one and no worker stays isolated", "[preduce]") {
  const auto groups = heavy_tail_schedule(options(IsolationRule::FreshMember));
  const auto paper = heavy_tail_schedule(options(IsolationRule::WaitAll));
  // While worker 5 stalls, the other 15 (about 15 / 4 groups per mean step of 3 units) go on.
  const auto going_on = groups_during_stall(groups);
  CHECK(going_on > static_cast<std::size_t>(0.5 * kStall / 3.0 * 15.0 / 4.0));
  // The paper's rule stops every group once the bound is reached until the stalled worker is back.
  CHECK(groups_during_stall(paper) < going_on / 10);
  // The guarantee: past the bound, a group that joins no components is the main component's;
  // a worker outside the main component takes part in at most `bound` groups without joining.
  const int bound = options(IsolationRule::FreshMember).isolation_bound;
  Components uf(kWorkers);
  int stalled_groups_after = -1;
  for (const auto& g : groups) {
    const bool joins = uf.joins(g), in_main = uf.root(g.members[0]) == uf.main();
    if (uf.since_reset >= bound && !joins) CHECK(in_main);
    CHECK(g.connecting == (uf.since_reset >= bound && joins));
    const bool has_stalled = std::count(g.members.begin(), g.members.end(), kStalled) > 0;
    if (has_stalled && g.closed_at > kStallStart + kStall && stalled_groups_after < 0)
      stalled_groups_after = joins || in_main ? 0 : 1;
    uf.add(g);
  }
  for (int run : longest_unjoined(groups, kWorkers)) CHECK(run <= bound);
  CHECK(stalled_groups_after == 0);  // back from its stall, it joins the others at once
  CHECK(std::any_of(groups.begin(), groups.end(), [](const Group& g) { return g.connecting; }));
}

TEST_CASE("fresh_member: pairs that keep pairing by FIFO are joined within the bound", "[preduce]") {
  // Workers 0, 1 step every time unit, the others every 3 units, all in step: by FIFO alone
  // every pair is the same pair again, four components for ever.
  GroupOptions o;
  o.num_workers = 8;
  o.group_size = 2;
  o.isolation_bound = 6;
  const auto step = [](int w, double) { return w < 2 ? 1.0 : 3.0; };
  const auto bounded = blocking_schedule(o, step);
  for (int run : longest_unjoined(bounded, 8)) CHECK(run <= o.isolation_bound);
  o.isolation_bound = 0;
  const auto free_groups = blocking_schedule(o, step);
  const auto unbounded = longest_unjoined(free_groups, 8);
  CHECK(*std::max_element(unbounded.begin(), unbounded.end()) > 100);
  // The fast pair is not held back: as many groups as without the bound, within 10%.
  CHECK(static_cast<double>(bounded.size()) > 0.9 * static_cast<double>(free_groups.size()));
}
