#include "lib/placement/planner.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "lib/placement/planner_moves.hpp"

namespace skew::placement {

namespace {

using moves::add_replica;
using moves::holds;
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

// A placement reached by some moves from the search's current one, scored under the estimate.
struct Scored {
  LayerPlacement placement;
  PlacementChange change;
  double time = 0;     // predicted per-iteration seconds
  double cost = 0;     // one-off seconds from the layer's placement before the plan
  double busiest = 0;  // tokens of the busiest rank
};

class Search {
 public:
  Search(const CostModel& model, const LayerPlacement& current, const std::vector<double>& load,
         const PlannerOptions& o)
      : model_(model), current_(current), load_(load), options_(o) {}

  Scored score(LayerPlacement p, PlacementChange change = {}) const {
    assign_shares(p, load_, options_.balanced_shares);
    const auto loads = model_.rank_loads(p, load_);
    Scored s{std::move(p), std::move(change), 0, 0, *std::max_element(loads.begin(), loads.end())};
    s.time = model_.predict(s.placement, load_).total();
    s.cost = model_.change_seconds(current_, s.placement);
    return s;
  }

  // Per-iteration gain of going from `from` to `to`, less its sampling noise (noise_z standard
  // errors of a gain that moves tokens off the busiest rank: the busiest ranks' token counts are
  // Poisson-like, variance_per_token x count), less the extra one-off cost over the horizon.
  double net_gain(const Scored& from, const Scored& to) const {
    const double noise = model_.compute_seconds(std::sqrt(options_.variance_per_token * (from.busiest + to.busiest)));
    return (from.time - to.time) - options_.noise_z * noise - (to.cost - from.cost) / horizon();
  }

  std::vector<Scored> neighbours(const Scored& from) const {
    std::vector<Scored> out;
    for (auto& c : moves::candidates(from.placement, model_.rank_loads(from.placement, load_), load_))
      out.push_back(score(std::move(c.placement), std::move(c.change)));
    return out;
  }

  // The best single move from `at` that pays (a net gain above rounding), or none.
  std::optional<Scored> best_move(const Scored& at) const {
    std::optional<Scored> best;
    double best_net = 1e-9 * at.time;
    for (auto& n : neighbours(at))
      if (const double net = net_gain(at, n); net > best_net) best_net = net, best = std::move(n);
    return best;
  }

  // When no single move pays: the best pair whose first move is one of the `lookahead` moves
  // gaining most (paying or not) and whose second pays with it, e.g. a shrink that frees the slot
  // a later expand needs, or a migration that only pays together with a replica. Empty if none.
  std::vector<Scored> best_pair(const Scored& at) const {
    auto first = neighbours(at);
    std::sort(first.begin(), first.end(), [](const Scored& a, const Scored& b) { return a.time < b.time; });
    first.resize(std::min<std::size_t>(first.size(), static_cast<std::size_t>(options_.lookahead)));
    std::vector<Scored> best;
    double best_net = 1e-9 * at.time;
    for (auto& f : first)
      for (auto& second : neighbours(f))
        if (const double net = net_gain(at, second); net > best_net) {
          best_net = net;
          best = {f, std::move(second)};
        }
    return best;
  }

  double horizon() const { return std::max(1, options_.interval); }

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
    plan.predicted_before = model_.predict(current_, load_).total();
    Scored at = score(current_);
    const int max_ops = options_.max_ops > 0
                            ? options_.max_ops
                            : at.placement.world_size * at.placement.slots_per_rank + at.placement.num_experts();
    const auto take = [&](Scored next) {
      next.change.predicted_gain = at.time - next.time;
      next.change.change_seconds = next.cost - at.cost;
      plan.changes.push_back(next.change);
      at = std::move(next);
    };
    while (static_cast<int>(plan.changes.size()) < max_ops) {
      if (auto next = best_move(at)) {
        take(std::move(*next));
        continue;
      }
      auto pair = options_.lookahead > 0 && static_cast<int>(plan.changes.size()) + 2 <= max_ops
                      ? best_pair(at)
                      : std::vector<Scored>{};
      if (pair.empty()) break;
      for (auto& step : pair) take(std::move(step));
    }
    LayerPlacement p = std::move(at.placement);
    double time = at.time, cost = at.cost;
    if (options_.variant == PlannerVariant::Hedge && options_.hedge > 0) hedge(plan, p, time, cost, horizon());
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
