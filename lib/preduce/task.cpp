#include "lib/preduce/task.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/memory_limits.hpp"
#include "core/rng.hpp"
#include "kernels/wide_classical.hpp"
#include "lib/preduce/data.hpp"
#include "lib/preduce/memory_estimate.hpp"
#include "lib/preduce/mlp.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"

namespace skew::preduce {
namespace {

// data.eval_rows: the test set cut to its first `rows` rows (0, or more than it has: kept whole).
void keep_first_rows(Dataset& d, int rows) {
  if (rows <= 0 || rows >= d.rows()) return;
  d.x.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(d.dim));
  d.y.resize(static_cast<std::size_t>(rows));
}

class MlpTask : public Task {
 public:
  MlpTask(const TrainOptions& opt, int num_workers) : opt_(opt) {
    SKEW_CHECK(opt.source != "synthetic_ctr", "data.source = synthetic_ctr needs model.kind = lr or fm");
    if (opt.source == "mnist") {
      const std::string train_path = opt.mnist_dir + "/train.csv";
      LabelledSplits mnist = load_mnist_csv(opt.mnist_dir);
      train_ = std::move(mnist.train), test_ = std::move(mnist.test);
      SKEW_CHECK(train_.rows() >= num_workers,
                 train_path << ": " << train_.rows() << " rows cannot be shared by " << num_workers << " workers");
    } else {
      SKEW_CHECK(opt.rows >= num_workers,
                 "data.rows = " << opt.rows << " cannot be shared by " << num_workers << " workers");
      train_ = make_clusters(opt.rows, opt.dim, opt.classes, opt.separation, opt.seed, 0);
      test_ = make_clusters(opt.test_rows, opt.dim, opt.classes, opt.separation, opt.seed, 1);
    }
    keep_first_rows(test_, opt.eval_rows);
    std::vector<int> widths{train_.dim};
    widths.insert(widths.end(), opt.hidden.begin(), opt.hidden.end());
    widths.push_back(train_.classes);
    mlp_ = std::make_unique<Mlp>(widths);
    for (int w = 0; w < num_workers; ++w) shards_.push_back(shard(train_, w, num_workers));
    // Samplers point into shards_, which no longer grows.
    for (int w = 0; w < num_workers; ++w)
      samplers_.emplace_back(shards_[static_cast<std::size_t>(w)], opt.batch, opt.seed, w);
  }
  std::vector<float> init() const override { return mlp_->init(opt_.seed); }
  double loss_and_grad(const std::vector<float>& params, int worker, std::int64_t step,
                       std::vector<float>& grad) override {
    samplers_.at(static_cast<std::size_t>(worker)).fill(step, x_, y_);
    return mlp_->loss_and_grad(params, x_.data(), y_.data(), opt_.batch, grad);
  }
  double metric(const std::vector<float>& params) override {
    return mlp_->accuracy(params, test_.x.data(), test_.y.data(), test_.rows());
  }
  const char* metric_name() const override { return "accuracy"; }

 private:
  const TrainOptions& opt_;
  Dataset train_, test_;
  std::unique_ptr<Mlp> mlp_;
  std::vector<Dataset> shards_;
  std::vector<BatchSampler> samplers_;
  std::vector<float> x_;
  std::vector<int> y_;
};

// LR / FM on lib/wide's synthetic Criteo-like data: rows [0, rows) train, the next test_rows test.
class WideTask : public Task {
 public:
  WideTask(const TrainOptions& opt, int num_workers) : opt_(opt), pool_(1) {
    SKEW_CHECK(opt.eval_rows == 0, "data.eval_rows = " << opt.eval_rows
                                                       << " applies to model.kind = mlp; the test set of model.kind = "
                                                       << opt.model_kind << " is data.test_rows");
    wide::SyntheticSpec spec;
    spec.features = opt.ctr_features;
    spec.seed = opt.seed;
    train_ = wide::generate_synthetic(spec, 0, opt.rows);
    test_ = wide::generate_synthetic(spec, opt.rows, opt.rows + opt.test_rows);
    SKEW_CHECK(opt.rows >= num_workers,
               "data.rows = " << opt.rows << " cannot be shared by " << num_workers << " workers");
    shape_.kind = opt.model_kind == "fm" ? kernels::WideKind::FM : kernels::WideKind::LR;
    shape_.num_features = std::max(train_.num_features, test_.num_features);
    shape_.num_fields = std::max(train_.num_fields, test_.num_fields);
    shape_.k = shape_.kind == kernels::WideKind::LR ? 0 : opt.fm_k;
    for (int w = 0; w < num_workers; ++w)
      bounds_.push_back({static_cast<std::int64_t>(w) * opt.rows / num_workers,
                         static_cast<std::int64_t>(w + 1) * opt.rows / num_workers});
  }
  std::vector<float> init() const override {
    return wide::copy_to_vector(wide::WideModel::create(shape_, opt_.seed).params);
  }
  double loss_and_grad(const std::vector<float>& params, int worker, std::int64_t step,
                       std::vector<float>& grad) override {
    const auto [begin, end] = bounds_.at(static_cast<std::size_t>(worker));
    Rng rng(opt_.seed, 0x3de0000000ull + static_cast<std::uint64_t>(worker),
            static_cast<std::uint64_t>(step) * 2 * opt_.batch);
    batch_ = wide::SparseDataset{};
    batch_.num_features = shape_.num_features;
    batch_.num_fields = shape_.num_fields;
    for (int i = 0; i < opt_.batch; ++i) {
      const std::int64_t r = begin + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(end - begin)));
      const auto from = static_cast<std::size_t>(train_.row_ptr[static_cast<std::size_t>(r)]);
      const auto to = static_cast<std::size_t>(train_.row_ptr[static_cast<std::size_t>(r) + 1]);
      batch_.append_row(train_.index.data() + from, train_.field.data() + from, train_.value.data() + from, to - from,
                        train_.label[static_cast<std::size_t>(r)]);
    }
    grad.assign(params.size(), 0.0f);
    logits_.resize(static_cast<std::size_t>(opt_.batch));
    kernels::wide_classical_gradient(shape_, batch_.batch(0, opt_.batch), params.data(), grad.data(), logits_.data(),
                                     pool_);
    const float inv = 1.0f / static_cast<float>(opt_.batch);
    for (float& g : grad) g *= inv;
    return wide::logloss_sum(logits_.data(), batch_.label.data(), logits_.size()) / opt_.batch;
  }
  double metric(const std::vector<float>& params) override {
    logits_.resize(static_cast<std::size_t>(test_.rows()));
    kernels::wide_forward(shape_, test_.batch(0, test_.rows()), params.data(), logits_.data(), pool_);
    return wide::roc_auc(logits_, test_.label);
  }
  const char* metric_name() const override { return "auc"; }

 private:
  const TrainOptions& opt_;
  kernels::WideShape shape_;
  wide::SparseDataset train_, test_, batch_;
  std::vector<std::pair<std::int64_t, std::int64_t>> bounds_;
  std::vector<float> logits_;
  kernels::WidePool pool_;
};

}  // namespace

std::unique_ptr<Task> make_task(const TrainOptions& opt, int num_workers) {
  check_task_memory(opt, num_workers);
  const std::string what = "the model and data of model.kind = " + opt.model_kind + ", data.source = " + opt.source;
  if (opt.model_kind == "mlp")
    return allocating(what, -1, [&]() -> std::unique_ptr<Task> { return std::make_unique<MlpTask>(opt, num_workers); });
  SKEW_CHECK(opt.source == "synthetic_ctr",
             "model.kind = " << opt.model_kind << " trains on data.source = synthetic_ctr, not " << opt.source);
  return allocating(what, -1, [&]() -> std::unique_ptr<Task> { return std::make_unique<WideTask>(opt, num_workers); });
}

}  // namespace skew::preduce
