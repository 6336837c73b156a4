#include "lib/placement/plan_log.hpp"

#include <algorithm>
#include <cmath>

#include "lib/placement/planner.hpp"

namespace skew::placement {

double best_share_within(std::vector<double> values, double tolerance) {
  if (values.empty()) return 0;
  // A window [lo, lo (1 + t) / (1 - t)] holds the values within t of x = lo / (1 - t); the best
  // one starts at a value. Negative predictions are the same on the negated values.
  const auto best_positive = [tolerance](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    std::size_t best = 0;
    for (std::size_t i = 0, j = 0; i < v.size(); ++i) {
      if (v[i] <= 0) continue;
      const double hi = v[i] * (1 + tolerance) / (1 - tolerance);
      j = std::max(j, i);
      while (j < v.size() && v[j] <= hi) ++j;
      best = std::max(best, j - i);
    }
    return best;
  };
  const std::size_t positive = best_positive(values);
  for (double& v : values) v = -v;
  return static_cast<double>(std::max(positive, best_positive(values))) / static_cast<double>(values.size());
}

Json PlanRecord::to_json() const {
  Json j = {{"iteration", iteration},
            {"replicas_added", added},
            {"replicas_removed", removed},
            {"change_s", change_seconds},
            {"predicted_change_s", predicted_change_seconds},
            {"predicted_gain_s", predicted_gain},
            {"realised_gain_s", realised_gain},
            {"realised_iterations", realised_iterations},
            {"predicted_net_s", predicted_net()},
            {"realised_net_s", realised_net()}};
  if (futures > 0) {
    j["futures"] = futures;
    j["futures_within"] = futures_within;
    j["best_within"] = best_within;
  }
  return j;
}

double PlanRecord::predicted_net() const {
  return predicted_gain * static_cast<double>(realised_iterations) - predicted_change_seconds;
}

double PlanRecord::realised_net() const {
  return realised_gain * static_cast<double>(realised_iterations) - change_seconds;
}

double PlanStats::changes_per_100() const {
  double moves = 0;
  for (const auto& p : plans) moves += p.added + p.removed;
  return iterations > 0 ? 100.0 * moves / static_cast<double>(iterations) : 0.0;
}

double PlanStats::median_lifetime() const {
  if (lifetimes.empty()) return -1;
  std::vector<std::int64_t> sorted = lifetimes;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  return n % 2 ? static_cast<double>(sorted[n / 2]) : 0.5 * static_cast<double>(sorted[n / 2 - 1] + sorted[n / 2]);
}

PlanTracker::PlanTracker(const CostModel& planner, const CostModel& scorer, bool live_shares, PlanStats& stats)
    : planner_(planner), scorer_(scorer), live_shares_(live_shares), stats_(stats) {}

double PlanTracker::seconds(const CostModel& model, LayerPlacement p, const std::vector<double>& load) const {
  if (live_shares_) assign_shares(p, load, true);
  return model.predict(p, load).total();
}

double PlanTracker::gain_on(const RoutingCounts& counts) const {
  double gain = 0;
  for (std::size_t l = 0; l < after_.size(); ++l) {
    const std::vector<double> load(counts[l].begin(), counts[l].end());
    gain += seconds(scorer_, before_[l], load) - seconds(scorer_, after_[l], load);
  }
  return gain;
}

void PlanTracker::score_futures(PlanRecord& plan) const {
  std::vector<double> nets;
  for (const auto& future : futures_(plan.iteration, plan.realised_iterations)) {
    double gain = 0;
    for (const auto& counts : future) gain += gain_on(counts);
    nets.push_back(gain - plan.change_seconds);
  }
  const double predicted = plan.predicted_net();
  const auto within = std::count_if(nets.begin(), nets.end(), [&](double net) {
    return predicted != 0 && std::abs(net / predicted - 1) <= kPlanTolerance;
  });
  plan.futures = static_cast<std::int64_t>(nets.size());
  plan.futures_within = nets.empty() ? 0 : static_cast<double>(within) / static_cast<double>(nets.size());
  plan.best_within = best_share_within(std::move(nets), kPlanTolerance);
}

void PlanTracker::close() {
  if (stats_.plans.empty() || before_.empty()) return;
  auto& last = stats_.plans.back();
  last.realised_gain = last.realised_iterations ? realised_sum_ / static_cast<double>(last.realised_iterations) : 0;
  if (futures_ && last.realised_iterations > 0) score_futures(last);
}

void PlanTracker::planned(std::int64_t iteration, const std::vector<LayerPlacement>& before,
                          const std::vector<LayerPlacement>& after, const std::vector<std::vector<double>>& estimates,
                          double change_seconds) {
  close();
  PlanRecord r;
  r.iteration = iteration;
  r.change_seconds = change_seconds;
  if (born_.empty()) born_.resize(after.size());
  for (std::size_t l = 0; l < after.size(); ++l) {
    const int ranks = after[l].world_size;
    auto& born = born_[l];
    born.resize(static_cast<std::size_t>(after[l].num_experts() * ranks), -1);
    std::vector<char> held_before(born.size(), 0), held_after(born.size(), 0);
    for (int e = 0; e < after[l].num_experts(); ++e) {
      for (const auto& rep : before[l].experts[static_cast<std::size_t>(e)])
        held_before[static_cast<std::size_t>(e * ranks + rep.rank)] = 1;
      for (const auto& rep : after[l].experts[static_cast<std::size_t>(e)])
        held_after[static_cast<std::size_t>(e * ranks + rep.rank)] = 1;
    }
    for (std::size_t k = 0; k < born.size(); ++k) {
      if (held_after[k] && !held_before[k]) ++r.added, born[k] = iteration;
      if (held_before[k] && !held_after[k]) {
        ++r.removed;
        if (born[k] >= 0) stats_.lifetimes.push_back(iteration - born[k]);
        born[k] = -1;
      }
    }
    r.predicted_gain += seconds(planner_, before[l], estimates[l]) - seconds(planner_, after[l], estimates[l]);
    r.predicted_change_seconds += planner_.change_seconds(before[l], after[l]);
  }
  stats_.plans.push_back(r);
  before_ = before;
  after_ = after;
  realised_sum_ = 0;
}

void PlanTracker::step(const RoutingCounts& counts) {
  ++stats_.iterations;
  if (before_.empty()) return;
  realised_sum_ += gain_on(counts);
  ++stats_.plans.back().realised_iterations;
}

void PlanTracker::finish() {
  close();
  for (const auto& born : born_)
    stats_.alive_at_end += std::count_if(born.begin(), born.end(), [](std::int64_t b) { return b >= 0; });
}

}  // namespace skew::placement
