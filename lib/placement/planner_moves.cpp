#include "lib/placement/planner_moves.hpp"

#include <algorithm>

namespace skew::placement::moves {

bool holds(const Reps& reps, int rank) {
  return std::any_of(reps.begin(), reps.end(), [&](const Replica& r) { return r.rank == rank; });
}

void add_replica(LayerPlacement& p, int expert, int rank) {
  auto& reps = p.experts[static_cast<std::size_t>(expert)];
  reps.insert(std::lower_bound(reps.begin(), reps.end(), rank, [](const Replica& r, int v) { return r.rank < v; }),
              Replica{rank, 0.0});
}

void remove_replica(LayerPlacement& p, int expert, int rank) {
  auto& reps = p.experts[static_cast<std::size_t>(expert)];
  reps.erase(std::find_if(reps.begin(), reps.end(), [&](const Replica& r) { return r.rank == rank; }));
}

namespace {

// What the candidate moves of one placement read: each rank's predicted load and used slots,
// and each expert's load.
struct Loads {
  const LayerPlacement& p;
  std::vector<double> rank;
  std::vector<int> used;
  const std::vector<double>& expert;
  bool free_slot(int r) const { return used[static_cast<std::size_t>(r)] < p.slots_per_rank; }
  double per_replica(int e) const {
    return expert[static_cast<std::size_t>(e)] / static_cast<double>(p.experts[static_cast<std::size_t>(e)].size());
  }
  // The least loaded rank that `allowed` admits, or -1.
  template <class Allowed>
  int least_loaded(Allowed&& allowed) const {
    int best = -1;
    for (int r = 0; r < p.world_size; ++r)
      if (allowed(r) && (best < 0 || rank[static_cast<std::size_t>(r)] < rank[static_cast<std::size_t>(best)]))
        best = r;
    return best;
  }
  // The `n` least loaded ranks that `allowed` admits, least loaded first.
  template <class Allowed>
  std::vector<int> least_loaded_n(int n, Allowed&& allowed) const {
    std::vector<int> out;
    for (int r = 0; r < p.world_size; ++r)
      if (allowed(r)) out.push_back(r);
    const auto by_load = [&](int a, int b) {
      return rank[static_cast<std::size_t>(a)] < rank[static_cast<std::size_t>(b)] ||
             (rank[static_cast<std::size_t>(a)] == rank[static_cast<std::size_t>(b)] && a < b);
    };
    const auto keep = std::min<std::size_t>(out.size(), static_cast<std::size_t>(n));
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(keep), out.end(), by_load);
    out.resize(keep);
    return out;
  }
};

std::vector<int> used_slots(const LayerPlacement& p) {
  std::vector<int> used(static_cast<std::size_t>(p.world_size), 0);
  for (const auto& reps : p.experts)
    for (const auto& r : reps) ++used[static_cast<std::size_t>(r.rank)];
  return used;
}

// expand: each of the `hottest` experts (per replica) gains a replica on one of the `ranks` least
// loaded ranks with room that lack it.
void expand_hottest(const Loads& l, const std::vector<int>& hottest, int ranks, std::vector<Candidate>& out) {
  for (int hot : hottest) {
    const Reps& reps = l.p.experts[static_cast<std::size_t>(hot)];
    for (int to : l.least_loaded_n(ranks, [&](int r) { return l.free_slot(r) && !holds(reps, r); })) {
      LayerPlacement next = l.p;
      add_replica(next, hot, to);
      out.push_back({std::move(next), {0, 0, "expand", hot, -1, to, -1, 0, 0}});
    }
  }
}

// shrink and shift: each of the `coldest` replicated experts (per replica) gives up a replica, on
// its busiest rank (shrink), or on its least loaded rank that lacks the hottest expert, which
// takes the slot (shift: the paper's "rob the rich").
void shrink_or_shift_coldest(const Loads& l, int hot, const std::vector<int>& coldest, std::vector<Candidate>& out) {
  const LayerPlacement& p = l.p;
  const Reps& hot_reps = p.experts[static_cast<std::size_t>(hot)];
  for (int cold : coldest) {
    const Reps& cold_reps = p.experts[static_cast<std::size_t>(cold)];
    int busiest = cold_reps.front().rank, freest = -1;
    for (const auto& r : cold_reps) {
      if (l.rank[static_cast<std::size_t>(r.rank)] > l.rank[static_cast<std::size_t>(busiest)]) busiest = r.rank;
      if (!holds(hot_reps, r.rank) &&
          (freest < 0 || l.rank[static_cast<std::size_t>(r.rank)] < l.rank[static_cast<std::size_t>(freest)]))
        freest = r.rank;
    }
    LayerPlacement shrunk = p;
    remove_replica(shrunk, cold, busiest);
    out.push_back({std::move(shrunk), {0, 0, "shrink", cold, busiest, -1, -1, 0, 0}});
    if (freest >= 0) {
      LayerPlacement shifted = p;
      remove_replica(shifted, cold, freest);
      add_replica(shifted, hot, freest);
      out.push_back({std::move(shifted), {0, 0, "shift", hot, freest, freest, cold, 0, 0}});
    }
  }
}

// The experts of the most loaded rank: each may gain a replica where there is room, or move its
// replica there (migrate); and, since a full budget leaves no room anywhere, migrate to the least
// loaded rank even when it is full, taking back in exchange that rank's lightest replica (two
// migrations in one step: the budget stays as it is).
void relieve_busiest_rank(const Loads& l, int hot, std::vector<Candidate>& out) {
  const LayerPlacement& p = l.p;
  int busiest_rank = 0;
  for (int r = 1; r < p.world_size; ++r)
    if (l.rank[static_cast<std::size_t>(r)] > l.rank[static_cast<std::size_t>(busiest_rank)]) busiest_rank = r;
  for (int e : p.experts_on(busiest_rank)) {
    const Reps& reps = p.experts[static_cast<std::size_t>(e)];
    if (const int to = l.least_loaded([&](int r) { return l.free_slot(r) && !holds(reps, r); }); to >= 0) {
      if (e != hot) {
        LayerPlacement next = p;
        add_replica(next, e, to);
        out.push_back({std::move(next), {0, 0, "expand", e, -1, to, -1, 0, 0}});
      }
      LayerPlacement moved = p;
      remove_replica(moved, e, busiest_rank);
      add_replica(moved, e, to);
      out.push_back({std::move(moved), {0, 0, "migrate", e, busiest_rank, to, -1, 0, 0}});
    }
    const int full = l.least_loaded([&](int r) { return !l.free_slot(r) && !holds(reps, r); });
    if (full < 0) continue;
    int back = -1;  // the lightest replica on `full` of an expert the busiest rank lacks
    for (int f : p.experts_on(full))
      if (!holds(p.experts[static_cast<std::size_t>(f)], busiest_rank) &&
          (back < 0 || l.per_replica(f) < l.per_replica(back)))
        back = f;
    if (back < 0) continue;
    LayerPlacement exchanged = p;
    remove_replica(exchanged, e, busiest_rank);
    add_replica(exchanged, e, full);
    remove_replica(exchanged, back, full);
    add_replica(exchanged, back, busiest_rank);
    out.push_back({std::move(exchanged), {0, 0, "migrate", e, busiest_rank, full, back, 0, 0}});
  }
}

}  // namespace

std::vector<Candidate> candidates(const LayerPlacement& p, std::vector<double> rank_loads,
                                  const std::vector<double>& load) {
  const Loads l{p, std::move(rank_loads), used_slots(p), load};
  constexpr int kWidth = 3;  // experts (and ranks) tried per kind of move
  std::vector<int> order(static_cast<std::size_t>(p.num_experts()));
  for (int e = 0; e < p.num_experts(); ++e) order[static_cast<std::size_t>(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l.per_replica(a) > l.per_replica(b); });
  const int hot = order.front();
  const std::vector<int> hottest(order.begin(), order.begin() + std::min<std::ptrdiff_t>(kWidth, p.num_experts()));
  std::vector<int> coldest;
  for (auto it = order.rbegin(); it != order.rend() && static_cast<int>(coldest.size()) < kWidth; ++it)
    if (*it != hot && p.experts[static_cast<std::size_t>(*it)].size() >= 2) coldest.push_back(*it);
  std::vector<Candidate> out;
  expand_hottest(l, hottest, 2, out);
  shrink_or_shift_coldest(l, hot, coldest, out);
  relieve_busiest_rank(l, hot, out);
  return out;
}

}  // namespace skew::placement::moves
