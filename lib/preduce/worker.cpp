#include "lib/preduce/worker.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace skew::preduce {

Worker::Worker(const TrainOptions& opt, Task& task, int worker, int num_workers)
    : opt_(&opt), task_(&task), id_(worker), hetero_(opt.hetero, worker, num_workers), params_(task.init()) {
  accum_.assign(params_.size(), 0.0f);
}

double Worker::gradient_at(const std::vector<float>& params) {
  const double loss = task_->loss_and_grad(params, id_, step_, grad_);
  SKEW_CHECK(std::isfinite(loss), "worker " << id_ << " step " << step_ << ": the loss is " << loss
                                            << "; training diverged (lower train.lr)");
  return loss;
}

void Worker::apply_gradient() {
  const auto lr = static_cast<float>(opt_->lr);
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * grad_[i];
  ++version_;
}

void Worker::accumulate_gradient() {
  for (std::size_t i = 0; i < params_.size(); ++i) accum_[i] += grad_[i];
}

void Worker::apply_accumulated() {
  const auto lr = static_cast<float>(opt_->lr);
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * accum_[i];
  std::fill(accum_.begin(), accum_.end(), 0.0f);
  ++version_;
}

double Curve::time_to(double target) const {
  double window_sum = 0.0;
  for (std::size_t k = 0; k < mean_accuracy.size(); ++k) {
    window_sum += mean_accuracy[k];
    if (k >= kScoreWindow) window_sum -= mean_accuracy[k - kScoreWindow];
    if (k + 1 >= kScoreWindow && window_sum / static_cast<double>(kScoreWindow) >= target)
      return static_cast<double>(k) * interval;
  }
  return -1.0;
}

Curve mean_curve(double interval, const std::vector<std::vector<double>>& series,
                 const std::vector<double>& final_accuracy, const std::vector<double>& weights) {
  SKEW_CHECK(weights.empty() || weights.size() == series.size(),
             "mean curve: " << weights.size() << " weights for " << series.size() << " series");
  Curve c;
  c.interval = interval;
  std::size_t length = 0;
  for (const auto& s : series) length = std::max(length, s.size());
  c.mean_accuracy.assign(length, 0.0);
  for (std::size_t w = 0; w < series.size(); ++w) {
    for (std::size_t k = 0; k < length; ++k) {
      const double a = k < series[w].size() ? series[w][k] : final_accuracy[w];
      c.mean_accuracy[k] += weights.empty() ? a / static_cast<double>(series.size()) : a * weights[w];
    }
  }
  return c;
}

}  // namespace skew::preduce
