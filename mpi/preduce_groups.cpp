#include "mpi/preduce_groups.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "core/error.hpp"

namespace skew::comm {

std::vector<double> staleness_weights(const std::vector<std::int64_t>& versions, double alpha) {
  SKEW_CHECK(!versions.empty(), "staleness weights of an empty group");
  SKEW_CHECK(alpha > 0.0 && alpha <= 1.0, "preduce.alpha must be in (0, 1], got " << alpha);
  const std::size_t k = versions.size();
  if (alpha == 1.0) return std::vector<double>(k, 1.0 / static_cast<double>(k));
  const std::int64_t max_version = *std::max_element(versions.begin(), versions.end());
  std::vector<std::int64_t> level(k);
  std::int64_t deepest = 1;
  for (std::size_t j = 0; j < k; ++j) {
    level[j] = max_version - versions[j] + 1;
    deepest = std::max(deepest, level[j]);
  }
  std::vector<int> count(static_cast<std::size_t>(deepest) + 1, 0);
  for (std::int64_t s : level) ++count[static_cast<std::size_t>(s)];
  std::vector<double> mass(count.size(), 0.0);
  double empty_mass = 0.0;
  for (std::int64_t i = 1; i <= deepest; ++i) {
    const double m = (1.0 - alpha) * std::pow(alpha, static_cast<double>(i - 1));
    if (count[static_cast<std::size_t>(i)] > 0)
      mass[static_cast<std::size_t>(i)] = m;
    else
      empty_mass += m;
  }
  mass[1] += empty_mass;
  const double norm = 1.0 - std::pow(alpha, static_cast<double>(deepest));
  std::vector<double> w(k);
  for (std::size_t j = 0; j < k; ++j) {
    const auto s = static_cast<std::size_t>(level[j]);
    w[j] = mass[s] / count[s] / norm;
  }
  return w;
}

void apply_member_update(float* x, const float* weighted_sum, std::size_t n, double w_self, int k, MemberRule rule) {
  if (k <= 1) return;
  if (rule == MemberRule::WeightedMean) {
    std::copy(weighted_sum, weighted_sum + n, x);
    return;
  }
  SKEW_CHECK(w_self < 1.0, "member weight " << w_self << " leaves nothing for the other " << k - 1 << " members");
  const double others = static_cast<double>(k - 1) / (1.0 - w_self);
  const double inv_k = 1.0 / k;
  for (std::size_t i = 0; i < n; ++i) {
    const double xi = x[i];
    x[i] = static_cast<float>((xi + others * (weighted_sum[i] - w_self * xi)) * inv_k);
  }
}

GroupFormer::GroupFormer(const GroupOptions& options)
    : opt_(options),
      done_(static_cast<std::size_t>(options.num_workers), 0),
      queued_(static_cast<std::size_t>(options.num_workers), 0),
      parent_(static_cast<std::size_t>(options.num_workers)),
      active_(options.num_workers) {
  SKEW_CHECK(opt_.num_workers >= 1, "partial reduce needs at least one worker, got " << opt_.num_workers);
  SKEW_CHECK(opt_.group_size >= 1, "preduce.group_size must be >= 1, got " << opt_.group_size);
  SKEW_CHECK(opt_.min_group >= 1, "minimum group size must be >= 1, got " << opt_.min_group);
  SKEW_CHECK(opt_.isolation_bound >= 0, "preduce.isolation_bound must be >= 0, got " << opt_.isolation_bound);
  reset_union();
}

void GroupFormer::ready(int worker, std::int64_t version, double now) {
  SKEW_CHECK(worker >= 0 && worker < opt_.num_workers, "ready from unknown worker " << worker);
  const auto w = static_cast<std::size_t>(worker);
  SKEW_CHECK(!done_[w], "worker " << worker << " reported ready after it finished");
  SKEW_CHECK(!queued_[w], "worker " << worker << " reported ready twice without being grouped");
  queued_[w] = 1;
  fifo_.push_back({worker, version, now});
}

void GroupFormer::finished(int worker) {
  SKEW_CHECK(worker >= 0 && worker < opt_.num_workers, "finish from unknown worker " << worker);
  const auto w = static_cast<std::size_t>(worker);
  SKEW_CHECK(!queued_[w], "worker " << worker << " finished while queued for a group");
  SKEW_CHECK(!done_[w], "worker " << worker << " finished twice");
  done_[w] = 1;
  --active_;
}

int GroupFormer::find(int w) const {
  while (parent_[static_cast<std::size_t>(w)] != w) {
    auto& p = parent_[static_cast<std::size_t>(w)];
    p = parent_[static_cast<std::size_t>(p)];
    w = p;
  }
  return w;
}

void GroupFormer::unite(int a, int b) {
  parent_[static_cast<std::size_t>(find(a))] = find(b);
}

void GroupFormer::reset_union() {
  std::iota(parent_.begin(), parent_.end(), 0);
  groups_since_reset_ = 0;
}

int GroupFormer::components() const {
  std::vector<char> seen(parent_.size(), 0);
  int n = 0;
  for (int w = 0; w < opt_.num_workers; ++w) {
    if (done_[static_cast<std::size_t>(w)]) continue;
    const auto root = static_cast<std::size_t>(find(w));
    if (!seen[root]) {
      seen[root] = 1;
      ++n;
    }
  }
  return n;
}

int GroupFormer::main_component() const {
  std::vector<int> size(parent_.size(), 0);
  for (int w = 0; w < opt_.num_workers; ++w)
    if (!done_[static_cast<std::size_t>(w)]) ++size[static_cast<std::size_t>(find(w))];
  int best = -1;  // in worker order, so a tie goes to the component of the lowest worker id
  for (int w = 0; w < opt_.num_workers; ++w) {
    if (done_[static_cast<std::size_t>(w)]) continue;
    const int root = find(w);
    if (best < 0 || size[static_cast<std::size_t>(root)] > size[static_cast<std::size_t>(best)]) best = root;
  }
  return best;
}

FormerState GroupFormer::state() const {
  SKEW_CHECK(fifo_.empty(), "partial-reduce state taken while " << fifo_.size() << " workers wait for a group");
  return {groups_formed_, groups_since_reset_, connecting_groups_, parent_};
}

void GroupFormer::restore(const FormerState& saved) {
  SKEW_CHECK(fifo_.empty() && groups_formed_ == 0, "partial-reduce state restored into a former already in use");
  SKEW_CHECK(saved.parent.size() == parent_.size(),
             "partial-reduce state of " << saved.parent.size() << " workers restored into one of " << parent_.size());
  for (int p : saved.parent)
    SKEW_CHECK(p >= 0 && p < opt_.num_workers, "partial-reduce state: union-find parent " << p << " out of range");
  groups_formed_ = saved.groups_formed;
  groups_since_reset_ = saved.groups_since_reset;
  connecting_groups_ = saved.connecting_groups;
  parent_ = saved.parent;
}

std::optional<double> GroupFormer::next_deadline() const {
  if (opt_.deadline_s <= 0.0 || fifo_.empty()) return std::nullopt;
  return fifo_.front().since + opt_.deadline_s;
}

std::optional<Group> GroupFormer::poll(double now) {
  if (fifo_.empty()) return std::nullopt;
  const std::size_t queued = fifo_.size();
  const bool everyone = static_cast<int>(queued) == active_;
  std::vector<std::size_t> picks;
  if (opt_.full_sync_every > 0 && (groups_formed_ + 1) % opt_.full_sync_every == 0) {
    if (!everyone) return std::nullopt;
    picks.resize(queued);
    std::iota(picks.begin(), picks.end(), std::size_t{0});
    return close(std::move(picks), true, false, now);
  }
  const auto target = static_cast<std::size_t>(std::min(opt_.group_size, active_));
  const bool by_size = queued >= target;
  const bool by_deadline = opt_.deadline_s > 0.0 && now >= fifo_.front().since + opt_.deadline_s &&
                           queued >= static_cast<std::size_t>(std::min(opt_.min_group, active_));
  if (!by_size && !by_deadline) return std::nullopt;
  const std::size_t limit = std::min(queued, static_cast<std::size_t>(opt_.group_size));
  const bool constrained = opt_.isolation_bound > 0 && groups_since_reset_ >= opt_.isolation_bound && components() > 1;
  if (!constrained) {
    picks.resize(limit);
    std::iota(picks.begin(), picks.end(), std::size_t{0});
    return close(std::move(picks), false, false, now);
  }
  return poll_constrained(limit, now);
}

std::optional<Group> GroupFormer::poll_constrained(std::size_t limit, double now) {
  // One queued worker per component first (FIFO order), then fill up to P in FIFO order.
  const std::size_t queued = fifo_.size();
  std::vector<std::size_t> picks;
  std::vector<char> represented(parent_.size(), 0), picked(queued, 0);
  for (std::size_t i = 0; i < queued; ++i) {
    const auto root = static_cast<std::size_t>(find(fifo_[i].worker));
    if (!represented[root]) {
      represented[root] = 1;
      picked[i] = 1;
      picks.push_back(i);
    }
  }
  const bool joins_components = picks.size() > 1;
  if (opt_.isolation_rule == IsolationRule::WaitAll && static_cast<int>(picks.size()) < components())
    return std::nullopt;  // wait for the missing components
  if (!joins_components && find(fifo_[picks.front()].worker) != main_component())
    return std::nullopt;  // an isolated component's group waits for a fresh member
  for (std::size_t i = 0; i < queued && picks.size() < limit; ++i)
    if (!picked[i]) picks.push_back(i);
  std::sort(picks.begin(), picks.end());
  return close(std::move(picks), false, joins_components, now);
}

Group GroupFormer::close(std::vector<std::size_t> picks, bool full_sync, bool connecting, double now) {
  std::vector<std::tuple<int, std::int64_t, double>> chosen;
  for (std::size_t i : picks) chosen.emplace_back(fifo_[i].worker, fifo_[i].version, fifo_[i].since);
  for (auto it = picks.rbegin(); it != picks.rend(); ++it)
    fifo_.erase(fifo_.begin() + static_cast<std::ptrdiff_t>(*it));
  std::sort(chosen.begin(), chosen.end());
  Group g;
  std::vector<std::int64_t> versions;
  for (const auto& [worker, version, since] : chosen) {
    g.members.push_back(worker);
    versions.push_back(version);
    g.ready_at.push_back(since);
    queued_[static_cast<std::size_t>(worker)] = 0;
  }
  g.max_version = *std::max_element(versions.begin(), versions.end());
  g.weights = staleness_weights(versions, opt_.alpha);
  g.full_sync = full_sync;
  g.closed_at = now;
  g.connecting = connecting;
  for (int m : g.members) unite(m, g.members.front());
  ++groups_formed_;
  ++groups_since_reset_;
  if (connecting) ++connecting_groups_;
  if (components() <= 1) reset_union();
  return g;
}

}  // namespace skew::comm
