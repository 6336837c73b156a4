// Partial-reduce group formation, as a pure class (no MPI, no clock of its own) so the same
// logic drives the MPI controller, the discrete-event simulator and the tests.
//
// Workers report "ready (worker, version)" into a FIFO. A group closes when
//   - P = group_size workers are queued (the first P in FIFO order), or
//   - a deadline has passed since the oldest queued worker arrived and at least min_group are
//     queued (deadline_s > 0; the eager-SGD style partial collective), or
//   - every still-active worker is queued (so the last workers never wait for finished ones).
// Two constraints shape or delay a group:
//   - isolation bound: after `isolation_bound` groups since the last reset of the union-find
//     over recent groups' members, a closing group takes one queued worker per component first
//     (FIFO order), then fills up to P in FIFO order; once the union-find is one set it resets.
//     What else it must wait for is the isolation rule (IsolationRule below).
//   - full sync: every `full_sync_every`-th group waits for all active workers (eager's forced
//     synchronous round).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace skew::comm {

// How a member combines its group's staleness-weighted sum S = sum_j w_j x_j.
//   KeepOwn (reference/preduce.md): x_i <- (x_i + (k-1) (S - w_i x_i) / (1 - w_i)) / k, 1/k on
//     its own model and (k-1)/k on the weighted mean of the others. For k = 2 the weights cancel
//     (each member takes the plain pair mean), so a fresh worker is pulled halfway back to a
//     stale one however stale it is.
//   WeightedMean: x_i <- S. Every member leaves with the same model, in which each member counts
//     by its staleness weight, for pairs too.
enum class MemberRule { KeepOwn, WeightedMean };

// What a group waits for once the isolation bound is reached.
//   FreshMember (default): only a group whose queued workers all lie in one component other
//     than the main one (the largest among active workers; ties: the one holding the lowest worker
//     id) waits, for a worker of another component: a worker outside the main component takes a
//     fresh member in its first group after the bound, and every group from then on joins all
//     components that have a worker queued. Groups of the main component alone never wait, so
//     a stalled worker stalls no one. Bound: a worker outside the main component takes part in
//     at most `isolation_bound` groups after a reset without joining another component.
//   WaitAll (the follow-up scheduler of reference/preduce.md): no group closes until every
//     component has a worker queued, so every worker's update reaches every other within
//     isolation_bound + 1 groups, but one stalled worker stops all averaging until it is ready.
enum class IsolationRule { FreshMember, WaitAll };

struct GroupOptions {
  int num_workers = 1;
  int group_size = 2;       // P
  double alpha = 0.9;       // staleness decay; 1 disables staleness weighting (equal weights)
  int isolation_bound = 0;  // groups between forced connecting groups; 0 = off
  IsolationRule isolation_rule = IsolationRule::FreshMember;
  double deadline_s = 0.0;  // 0 = close only at P members
  int min_group = 1;        // members needed to close at the deadline
  int full_sync_every = 0;  // every n-th group waits for all active workers; 0 = never
  MemberRule member_rule = MemberRule::KeepOwn;
};

struct Group {
  std::vector<int> members;     // sorted worker ids
  std::vector<double> weights;  // staleness-aware weight per member (same order), sum 1
  std::int64_t max_version = 0;
  bool full_sync = false;   // all active workers take part
  bool connecting = false;  // formed under the isolation bound
  // On the controller's clock: when each member's ready arrived (same order) and when the group
  // closed, so a member can split its wait into queueing and controller/message latency.
  std::vector<double> ready_at;
  double closed_at = 0.0;
};

// Staleness weights of reference/preduce.md: s_j = max_version - version_j + 1, T = max s;
// each level i with members gets (1 - alpha) alpha^(i-1), the mass of empty levels goes to
// level 1, members of one level share it, and all is divided by (1 - alpha^T).
std::vector<double> staleness_weights(const std::vector<std::int64_t>& versions, double alpha);

// Member update of `rule` with S = sum_j w_j x_j (`weighted_sum`). A group of one (k = 1)
// leaves x unchanged.
void apply_member_update(float* x, const float* weighted_sum, std::size_t n, double w_self, int k, MemberRule rule);

// The part of a GroupFormer's history that shapes its future groups, for a checkpoint taken
// with no worker queued: the group count (eager's full-sync rounds), the isolation bound's
// count since its last reset and its union-find over the members of those groups.
struct FormerState {
  std::int64_t groups_formed = 0, groups_since_reset = 0, connecting_groups = 0;
  std::vector<int> parent;  // empty: a fresh former
};

class GroupFormer {
 public:
  explicit GroupFormer(const GroupOptions& options);

  void ready(int worker, std::int64_t version, double now);
  void finished(int worker);
  // Returns the next group that may close at `now` (call until it returns nothing).
  std::optional<Group> poll(double now);
  // When a queued group would close by deadline, if nothing else happens first.
  std::optional<double> next_deadline() const;

  bool all_finished() const { return active_ == 0; }
  int active() const { return active_; }
  std::size_t queued() const { return fifo_.size(); }
  std::int64_t groups_formed() const { return groups_formed_; }
  std::int64_t connecting_groups() const { return connecting_groups_; }
  // Number of union-find components among active workers (1 = all connected).
  int components() const;
  // The union-find root of the main component: the largest among active workers (ties: the
  // one holding the lowest worker id); -1 when every worker has finished.
  int main_component() const;
  // Throws while a worker is queued (its group would be lost).
  FormerState state() const;
  // Before any ready(): continues the history of `saved` (of a former with as many workers).
  void restore(const FormerState& saved);

 private:
  struct Entry {
    int worker;
    std::int64_t version;
    double since;
  };
  int find(int w) const;
  void unite(int a, int b);
  void reset_union();
  Group close(std::vector<std::size_t> picks, bool full_sync, bool connecting, double now);
  // The group under the isolation bound, from `limit` of the queue, or nothing if it must wait.
  std::optional<Group> poll_constrained(std::size_t limit, double now);

  GroupOptions opt_;
  std::deque<Entry> fifo_;
  std::vector<char> done_, queued_;
  mutable std::vector<int> parent_;
  int active_;
  std::int64_t groups_formed_ = 0, groups_since_reset_ = 0, connecting_groups_ = 0;
};

}  // namespace skew::comm
