#include "lib/placement/plan_log.hpp"

#include <algorithm>

#include "lib/placement/planner.hpp"

namespace skew::placement {

Json PlanRecord::to_json() const {
  return {{"iteration", iteration},
          {"replicas_added", added},
          {"replicas_removed", removed},
          {"change_s", change_seconds},
          {"predicted_change_s", predicted_change_seconds},
          {"predicted_gain_s", predicted_gain},
          {"realised_gain_s", realised_gain},
          {"realised_iterations", realised_iterations},
          {"predicted_net_s", predicted_net()},
          {"realised_net_s", realised_net()}};
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

void PlanTracker::close() {
  if (stats_.plans.empty() || before_.empty()) return;
  auto& last = stats_.plans.back();
  last.realised_gain = last.realised_iterations ? realised_sum_ / static_cast<double>(last.realised_iterations) : 0;
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
  double gain = 0;
  for (std::size_t l = 0; l < after_.size(); ++l) {
    const std::vector<double> load(counts[l].begin(), counts[l].end());
    gain += seconds(scorer_, before_[l], load) - seconds(scorer_, after_[l], load);
  }
  realised_sum_ += gain;
  ++stats_.plans.back().realised_iterations;
}

void PlanTracker::finish() {
  close();
  for (const auto& born : born_)
    stats_.alive_at_end += std::count_if(born.begin(), born.end(), [](std::int64_t b) { return b >= 0; });
}

}  // namespace skew::placement
