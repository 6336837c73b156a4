#include "lib/placement/monitor.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace skew::placement {

LoadMonitor::LoadMonitor(int num_layers, int num_experts, double smoothing)
    : num_experts_(num_experts),
      smoothing_(smoothing),
      estimate_(static_cast<std::size_t>(num_layers), std::vector<double>(static_cast<std::size_t>(num_experts), 0.0)),
      last_(static_cast<std::size_t>(num_layers), std::vector<std::int64_t>(static_cast<std::size_t>(num_experts), 0)) {
  SKEW_CHECK(num_layers >= 1 && num_experts >= 1, "load monitor needs layers and experts");
  SKEW_CHECK(smoothing >= 0 && smoothing < 1, "placement.smoothing must be in [0, 1), got " << smoothing);
}

void LoadMonitor::observe(const std::vector<std::vector<std::int64_t>>& counts) {
  SKEW_CHECK(counts.size() == estimate_.size(),
             "routing counts for " << counts.size() << " layers, expected " << estimate_.size());
  for (std::size_t l = 0; l < counts.size(); ++l) {
    SKEW_CHECK(counts[l].size() == static_cast<std::size_t>(num_experts_),
               "layer " << l << " has counts for " << counts[l].size() << " experts, expected " << num_experts_);
    for (std::size_t e = 0; e < counts[l].size(); ++e) {
      SKEW_CHECK(counts[l][e] >= 0, "negative token count for layer " << l << " expert " << e);
      const double seen = static_cast<double>(counts[l][e]);
      estimate_[l][e] = observations_ == 0 ? seen : smoothing_ * estimate_[l][e] + (1 - smoothing_) * seen;
    }
    last_[l] = counts[l];
  }
  ++observations_;
}

void LoadMonitor::restore(const std::vector<double>& estimate, const std::vector<std::int64_t>& last,
                          std::int64_t observations) {
  const std::size_t E = static_cast<std::size_t>(num_experts_), cells = estimate_.size() * E;
  SKEW_CHECK(estimate.size() == cells && last.size() == cells,
             "load monitor state has " << estimate.size() << " / " << last.size() << " values, expected " << cells
                                       << " (" << estimate_.size() << " layers x " << E << " experts)");
  SKEW_CHECK(observations >= 0, "load monitor state has " << observations << " observations");
  for (std::size_t l = 0; l < estimate_.size(); ++l) {
    std::copy(estimate.begin() + static_cast<std::ptrdiff_t>(l * E),
              estimate.begin() + static_cast<std::ptrdiff_t>((l + 1) * E), estimate_[l].begin());
    std::copy(last.begin() + static_cast<std::ptrdiff_t>(l * E),
              last.begin() + static_cast<std::ptrdiff_t>((l + 1) * E), last_[l].begin());
  }
  observations_ = observations;
}

}  // namespace skew::placement
