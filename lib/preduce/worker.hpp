// What a worker does between synchronisations, shared by the MPI trainer and the simulator so
// both run the same arithmetic: its model, version and gradient (from the task, on its shard),
// and its injected delays.
#pragma once
#include <memory>
#include <vector>

#include "lib/preduce/hetero.hpp"
#include "lib/preduce/options.hpp"
#include "lib/preduce/task.hpp"

namespace skew::preduce {

class Worker {
 public:
  // `num_workers`: the run's workers (the moving heterogeneity model draws among them).
  Worker(const TrainOptions& opt, Task& task, int worker, int num_workers);

  // The gradient of this step's minibatch at `params` (its own model, or a snapshot of it for a
  // computing thread beside a communication thread) into grad(); returns the minibatch loss.
  // What to do with it is the sync mode's rule (sync/sync_mode.hpp).
  double gradient_at(const std::vector<float>& params);
  // A gradient step with grad() (a local one, or after a gradient reduction): a new version.
  void apply_gradient();
  // eager: grad() added to the accumulator of the gradients not yet applied ...
  void accumulate_gradient();
  // ... and, after their reduction, the accumulator applied and cleared: a new version.
  void apply_accumulated();
  void finish_step() { ++step_; }
  // Resume: the step a checkpoint was taken after (data order and delays follow from it).
  void set_step(std::int64_t step) { step_ = step; }

  std::vector<float>& params() { return params_; }
  std::vector<float>& grad() { return grad_; }
  std::vector<float>& accum() { return accum_; }
  std::int64_t version() const { return version_; }
  void set_version(std::int64_t v) { version_ = v; }
  // For AD-PSGD's communication thread, which updates the version under its model lock.
  std::int64_t* mutable_version() { return &version_; }
  std::int64_t step() const { return step_; }
  const Hetero& hetero() const { return hetero_; }
  int id() const { return id_; }

 private:
  const TrainOptions* opt_;
  Task* task_;
  int id_;
  Hetero hetero_;
  std::vector<float> params_, grad_, accum_;
  std::int64_t version_ = 0, step_ = 0;
};

// Test accuracy on a time grid (k * interval): each evaluated worker appends its accuracy for
// every grid point it has passed; their weighted mean gives the curve and the time to target.
struct Curve {
  // The scoring rule of every preduce report (scripts/preduce_report.py too): the first grid
  // point whose trailing window of this many points averages at or above the target. A single
  // point crosses early by SGD noise; the window does not.
  static constexpr std::size_t kScoreWindow = 4;
  double interval = 0.0;
  std::vector<double> mean_accuracy;
  // Grid time of that point, or -1 when never reached.
  double time_to(double target) const;
};
// `series[w]` may be shorter than the others: it is padded with `final_accuracy[w]`. `weights`
// (one per series, sum 1; empty = equal) weigh the series in the mean.
Curve mean_curve(double interval, const std::vector<std::vector<double>>& series,
                 const std::vector<double>& final_accuracy, const std::vector<double>& weights = {});

}  // namespace skew::preduce
