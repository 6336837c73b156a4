// FlexMoE's load monitor: the routing counts of every MoE layer, observed each iteration, and
// an exponentially smoothed estimate of the coming iteration's load per expert.
#pragma once
#include <cstdint>
#include <vector>

namespace skew::placement {

class LoadMonitor {
 public:
  // smoothing in [0, 1): estimate = smoothing * estimate + (1 - smoothing) * observed; 0 keeps
  // only the last iteration. The first observation initialises the estimate.
  LoadMonitor(int num_layers, int num_experts, double smoothing);
  void observe(const std::vector<std::vector<std::int64_t>>& counts);
  int num_layers() const { return static_cast<int>(estimate_.size()); }
  bool empty() const { return observations_ == 0; }
  std::int64_t observations() const { return observations_; }
  const std::vector<double>& estimate(int layer) const { return estimate_.at(static_cast<std::size_t>(layer)); }
  const std::vector<std::int64_t>& last(int layer) const { return last_.at(static_cast<std::size_t>(layer)); }
  // Puts back a checkpointed state: estimate and last are [layers][experts] flattened.
  void restore(const std::vector<double>& estimate, const std::vector<std::int64_t>& last, std::int64_t observations);

 private:
  int num_experts_;
  double smoothing_;
  std::int64_t observations_ = 0;
  std::vector<std::vector<double>> estimate_;
  std::vector<std::vector<std::int64_t>> last_;
};

}  // namespace skew::placement
