#include "lib/placement/planner.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace skew::placement {

namespace {

using Reps = std::vector<Replica>;

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

// Raises the lowest of `base` to a common level with `amount` in total: x_i = max(0, L - base_i).
std::vector<double> water_fill(const std::vector<double>& base, double amount) {
  std::vector<double> sorted = base;
  std::sort(sorted.begin(), sorted.end());
  double level = sorted.front() + amount, prefix = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    prefix += sorted[i];
    const double candidate = (amount + prefix) / static_cast<double>(i + 1);
    if (i + 1 == sorted.size() || candidate <= sorted[i + 1]) {
      level = candidate;
      break;
    }
  }
  std::vector<double> out(base.size());
  for (std::size_t i = 0; i < base.size(); ++i) out[i] = std::max(0.0, level - base[i]);
  // An amount far below the bases (a smoothed estimate decaying towards 0) is lost to rounding
  // in `level`: it then goes whole to the lowest base.
  if (amount > 0 && std::all_of(out.begin(), out.end(), [](double f) { return f <= 0; }))
    out[static_cast<std::size_t>(std::min_element(base.begin(), base.end()) - base.begin())] = amount;
  return out;
}

struct Candidate {
  LayerPlacement placement;
  PlacementChange change;
};

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
};

std::vector<int> used_slots(const LayerPlacement& p) {
  std::vector<int> used(static_cast<std::size_t>(p.world_size), 0);
  for (const auto& reps : p.experts)
    for (const auto& r : reps) ++used[static_cast<std::size_t>(r.rank)];
  return used;
}

// expand: the hottest expert (per replica) gains a replica on the least loaded rank with room.
void expand_hottest(const Loads& l, int hot, std::vector<Candidate>& out) {
  const Reps& hot_reps = l.p.experts[static_cast<std::size_t>(hot)];
  if (const int to = l.least_loaded([&](int r) { return l.free_slot(r) && !holds(hot_reps, r); }); to >= 0) {
    LayerPlacement next = l.p;
    add_replica(next, hot, to);
    out.push_back({std::move(next), {0, 0, "expand", hot, -1, to, -1, 0, 0}});
  }
}

// shrink and shift: the coldest replicated expert (per replica) gives up a replica, on its
// busiest rank (shrink), or on its least loaded rank that lacks the hottest, which takes the slot
// (shift).
void shrink_or_shift_coldest(const Loads& l, int hot, std::vector<Candidate>& out) {
  const LayerPlacement& p = l.p;
  int cold = -1;
  for (int e = 0; e < p.num_experts(); ++e)
    if (e != hot && p.experts[static_cast<std::size_t>(e)].size() >= 2 &&
        (cold < 0 || l.per_replica(e) < l.per_replica(cold)))
      cold = e;
  if (cold < 0) return;
  const Reps& hot_reps = p.experts[static_cast<std::size_t>(hot)];
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

class Search {
 public:
  Search(const CostModel& model, const LayerPlacement& current, const std::vector<double>& load,
         const PlannerOptions& o)
      : model_(model), current_(current), load_(load), options_(o) {}

  std::vector<Candidate> candidates(const LayerPlacement& p) const {
    const Loads l{p, model_.rank_loads(p, load_), used_slots(p), load_};
    std::vector<Candidate> out;
    int hot = 0;
    for (int e = 1; e < p.num_experts(); ++e)
      if (l.per_replica(e) > l.per_replica(hot)) hot = e;
    expand_hottest(l, hot, out);
    shrink_or_shift_coldest(l, hot, out);
    relieve_busiest_rank(l, hot, out);
    return out;
  }

  // Free slots take replicas of the hottest experts per replica (hottest first, each on the
  // least loaded rank with room that lacks it) while each costs at most hedge x the step.
  void hedge(LayerPlan& plan, LayerPlacement& p, double& time, double& cost, double horizon) const {
    for (;;) {
      const auto loads = model_.rank_loads(p, load_);
      std::vector<int> used(static_cast<std::size_t>(p.world_size), 0);
      for (const auto& reps : p.experts)
        for (const auto& r : reps) ++used[static_cast<std::size_t>(r.rank)];
      int expert = -1, rank = -1;
      double hottest = 0;
      for (int e = 0; e < p.num_experts(); ++e) {
        const auto& reps = p.experts[static_cast<std::size_t>(e)];
        const double per_replica = load_[static_cast<std::size_t>(e)] / static_cast<double>(reps.size());
        if (per_replica <= hottest) continue;
        int to = -1;
        for (int r = 0; r < p.world_size; ++r)
          if (used[static_cast<std::size_t>(r)] < p.slots_per_rank && !holds(reps, r) &&
              (to < 0 || loads[static_cast<std::size_t>(r)] < loads[static_cast<std::size_t>(to)]))
            to = r;
        if (to >= 0) expert = e, rank = to, hottest = per_replica;
      }
      if (expert < 0) return;
      LayerPlacement next = p;
      add_replica(next, expert, rank);
      assign_shares(next, load_, options_.balanced_shares);
      const double t = model_.predict(next, load_).total();
      const double k = model_.change_seconds(current_, next);
      if ((t - time) + (k - cost) / horizon > options_.hedge * time) return;
      plan.changes.push_back({0, 0, "hedge", expert, -1, rank, -1, time - t, k - cost});
      p = std::move(next);
      time = t;
      cost = k;
    }
  }

  LayerPlan run() {
    LayerPlan plan;
    LayerPlacement p = current_;
    assign_shares(p, load_, options_.balanced_shares);
    plan.predicted_before = model_.predict(current_, load_).total();
    double time = model_.predict(p, load_).total();
    double cost = 0;
    const double horizon = std::max(1, options_.interval);
    const int max_ops = options_.max_ops > 0 ? options_.max_ops : p.world_size * p.slots_per_rank + p.num_experts();
    for (int op = 0; op < max_ops; ++op) {
      double best_net = 1e-9 * time;
      Candidate* best = nullptr;
      double best_time = 0, best_cost = 0;
      auto cands = candidates(p);
      for (auto& c : cands) {
        assign_shares(c.placement, load_, options_.balanced_shares);
        const double t = model_.predict(c.placement, load_).total();
        const double k = model_.change_seconds(current_, c.placement);
        const double net = (time - t) - (k - cost) / horizon;
        if (net > best_net) best_net = net, best = &c, best_time = t, best_cost = k;
      }
      if (best == nullptr) break;
      best->change.predicted_gain = time - best_time;
      best->change.change_seconds = best_cost - cost;
      plan.changes.push_back(best->change);
      p = std::move(best->placement);
      time = best_time;
      cost = best_cost;
    }
    if (options_.variant == PlannerVariant::Hedge && options_.hedge > 0) hedge(plan, p, time, cost, horizon);
    // Keep the current shares when no replica changed and rebalancing shares gains nothing.
    if (plan.changes.empty() && time >= plan.predicted_before) p = current_;
    plan.predicted_after = model_.predict(p, load_).total();
    plan.change_seconds = cost;
    p.validate();
    plan.placement = std::move(p);
    return plan;
  }

 private:
  const CostModel& model_;
  const LayerPlacement& current_;
  const std::vector<double>& load_;
  PlannerOptions options_;
};

}  // namespace

void assign_shares(LayerPlacement& p, const std::vector<double>& load, bool balanced) {
  SKEW_CHECK(load.size() == p.experts.size(), "load has " << load.size() << " experts, placement " << p.num_experts());
  for (auto& reps : p.experts)
    for (auto& r : reps) r.share = 1.0 / static_cast<double>(reps.size());
  if (!balanced) return;
  std::vector<int> order;
  for (int e = 0; e < p.num_experts(); ++e)
    if (p.experts[static_cast<std::size_t>(e)].size() >= 2 && load[static_cast<std::size_t>(e)] > 0) order.push_back(e);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return load[static_cast<std::size_t>(a)] > load[static_cast<std::size_t>(b)]; });
  std::vector<double> rank_load(static_cast<std::size_t>(p.world_size), 0.0);
  for (std::size_t e = 0; e < p.experts.size(); ++e)
    for (const auto& r : p.experts[e]) rank_load[static_cast<std::size_t>(r.rank)] += r.share * load[e];
  constexpr int sweeps = 4;
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (int e : order) {
      auto& reps = p.experts[static_cast<std::size_t>(e)];
      const double total = load[static_cast<std::size_t>(e)];
      std::vector<double> base;
      for (const auto& r : reps) base.push_back(rank_load[static_cast<std::size_t>(r.rank)] - r.share * total);
      const auto fill = water_fill(base, total);
      double sum = 0;
      for (std::size_t i = 0; i < reps.size(); ++i) {
        reps[i].share = fill[i] / total;
        sum += reps[i].share;
      }
      for (std::size_t i = 0; i < reps.size(); ++i) {
        reps[i].share /= sum;
        rank_load[static_cast<std::size_t>(reps[i].rank)] = base[i] + reps[i].share * total;
      }
    }
  }
}

LayerPlan plan_layer(const CostModel& model, const LayerPlacement& current, const std::vector<double>& load,
                     const PlannerOptions& options) {
  current.validate();
  return Search(model, current, load, options).run();
}

}  // namespace skew::placement
