// What the workers train, behind one interface so the sync modes, the MPI driver and the
// simulator never see the model: a flat parameter vector, a minibatch gradient per (worker,
// step) on that worker's shard, and a test metric. Two tasks:
//   mlp  - the MLP classifier (MNIST or generated clusters); metric: test accuracy
//   lr/fm - the wide models of lib/wide on its synthetic CTR data; metric: test ROC AUC
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/preduce/options.hpp"

namespace skew::preduce {

class Task {
 public:
  virtual ~Task() = default;
  virtual std::vector<float> init() const = 0;  // the same initial model on every worker
  // Mean loss of worker `worker`'s minibatch of `step`; `grad` gets the mean gradient.
  virtual double loss_and_grad(const std::vector<float>& params, int worker, std::int64_t step,
                               std::vector<float>& grad) = 0;
  virtual double metric(const std::vector<float>& params) = 0;
  virtual const char* metric_name() const = 0;
};

// Loads or generates the data and splits it into `num_workers` shards.
std::unique_ptr<Task> make_task(const TrainOptions& opt, int num_workers);

}  // namespace skew::preduce
