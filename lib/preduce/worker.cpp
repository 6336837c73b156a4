#include "lib/preduce/worker.hpp"

#include <algorithm>

#include "lib/core/error.hpp"

namespace skew::preduce {

Problem load_problem(const TrainOptions& opt) {
  Problem p;
  if (opt.source == "mnist") {
    p.train = load_csv(opt.mnist_dir + "/train.csv", 10);
    p.test = load_csv(opt.mnist_dir + "/test.csv", 10);
    SKEW_CHECK(p.train.dim == p.test.dim, opt.mnist_dir << ": train has " << p.train.dim << " features, test "
                                                         << p.test.dim);
    p.test.classes = p.train.classes = std::max(p.train.classes, p.test.classes);
  } else {
    p.train = make_clusters(opt.rows, opt.dim, opt.classes, opt.separation, opt.seed, 0);
    p.test = make_clusters(opt.test_rows, opt.dim, opt.classes, opt.separation, opt.seed, 1);
  }
  p.widths.push_back(p.train.dim);
  p.widths.insert(p.widths.end(), opt.hidden.begin(), opt.hidden.end());
  p.widths.push_back(p.train.classes);
  return p;
}

Worker::Worker(const TrainOptions& opt, const Problem& problem, int worker, int num_workers)
    : opt_(&opt),
      id_(worker),
      shard_(shard(problem.train, worker, num_workers)),
      sampler_(shard_, opt.batch, opt.seed, worker),
      hetero_(opt.hetero, worker) {
  params_ = Mlp(problem.widths).init(opt.seed);  // every worker starts from the same model
  accum_.assign(params_.size(), 0.0f);
}

double Worker::local_step(Mlp& mlp) {
  sampler_.fill(step_, batch_x_, batch_y_);
  const double loss = mlp.loss_and_grad(params_, batch_x_.data(), batch_y_.data(), opt_->batch, grad_);
  const auto lr = static_cast<float>(opt_->lr);
  switch (opt_->mode) {
    case SyncMode::Preduce:
      if (opt_->reduce_gradient) break;
      [[fallthrough]];
    case SyncMode::Adpsgd:
    case SyncMode::Local:
      for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * grad_[i];
      ++version_;
      break;
    case SyncMode::Eager:
      for (std::size_t i = 0; i < params_.size(); ++i) accum_[i] += grad_[i];
      break;
    case SyncMode::Allreduce:
      break;
  }
  return loss;
}

void Worker::apply_reduced(bool from_accumulator) {
  const auto lr = static_cast<float>(opt_->lr);
  const auto& g = from_accumulator ? accum_ : grad_;
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= lr * g[i];
  if (from_accumulator) std::fill(accum_.begin(), accum_.end(), 0.0f);
  ++version_;
}

double Curve::time_to(double target) const {
  for (std::size_t k = 0; k < mean_accuracy.size(); ++k)
    if (mean_accuracy[k] >= target) return static_cast<double>(k) * interval;
  return -1.0;
}

Curve mean_curve(double interval, const std::vector<std::vector<double>>& series, const std::vector<double>& final_accuracy) {
  Curve c;
  c.interval = interval;
  std::size_t length = 0;
  for (const auto& s : series) length = std::max(length, s.size());
  c.mean_accuracy.assign(length, 0.0);
  for (std::size_t w = 0; w < series.size(); ++w)
    for (std::size_t k = 0; k < length; ++k)
      c.mean_accuracy[k] += (k < series[w].size() ? series[w][k] : final_accuracy[w]) / static_cast<double>(series.size());
  return c;
}

}  // namespace skew::preduce
