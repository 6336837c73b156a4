#include "lib/wide/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "core/timer.hpp"
#include "kernels/wide_classical.hpp"
#include "lib/wide/gpu_trainer.hpp"

namespace skew::wide {

TrainSchema schema_from_name(const std::string& name) {
  if (name == "classical") return TrainSchema::Classical;
  if (name == "flow") return TrainSchema::Flow;
  SKEW_THROW("unknown train.schema '" << name << "' (expected classical or flow)");
}

const char* schema_name(TrainSchema schema) {
  return schema == TrainSchema::Classical ? "classical" : "flow";
}

ClassicalSync classical_sync_from_name(const std::string& name) {
  if (name == "hogwild") return ClassicalSync::Hogwild;
  if (name == "atomic") return ClassicalSync::Atomic;
  SKEW_THROW("unknown train.classical_sync '" << name << "' (expected hogwild or atomic)");
}

TrainDevice device_from_name(const std::string& name) {
  if (name == "cpu") return TrainDevice::Cpu;
  if (name == "cuda") return TrainDevice::Cuda;
  SKEW_THROW("unknown train.device '" << name << "' (expected cpu or cuda)");
}

const char* device_name(TrainDevice device) {
  return device == TrainDevice::Cpu ? "cpu" : "cuda";
}

bool runs_hogwild(const TrainOptions& o, int ranks) {
  return o.schema == TrainSchema::Classical && o.classical_sync == ClassicalSync::Hogwild &&
         o.device == TrainDevice::Cpu && ranks == 1;
}

int model_shaped_arrays(const TrainOptions& o, int ranks) {
  const int state = o.optimizer.kind == OptimizerKind::Sgd ? 0 : o.optimizer.kind == OptimizerKind::AdaGrad ? 1 : 2;
  return 1 + state + (runs_hogwild(o, ranks) ? 0 : 1);
}

void require_device(TrainDevice device) {
  if (device != TrainDevice::Cuda) return;
  SKEW_CHECK(cuda_built(), "train.device = cuda, but this build has no CUDA (configure with -DSKEW_CUDA=ON)");
  SKEW_CHECK(cuda_device_count() > 0, "train.device = cuda, but no CUDA device is visible; use train.device = cpu");
}

WideTrainer::WideTrainer(WideModel model, const TrainOptions& options, std::shared_ptr<comm::ProcessGroup> group)
    : model_(std::move(model)), options_(options), group_(std::move(group)) {
  // The GPU takes the whole vector up, and FTRL derives its z state from every parameter:
  // neither can leave rows for later.
  if (options.device == TrainDevice::Cuda || options.optimizer.kind == OptimizerKind::Ftrl)
    model_.materialise(options.threads);
  pool_ = std::make_unique<kernels::WidePool>(options.threads, "train.threads", options.profile);
  optimizer_ = std::make_unique<Optimizer>(options.optimizer, model_.shape, model_.params);
  if (options.device == TrainDevice::Cuda) {
    require_device(options.device);
    const std::span<const float> n = optimizer_->n_state(), z = optimizer_->z_state();
    cuda_ = std::make_unique<CudaStep>(model_.shape, options.schema == TrainSchema::Flow, options.flow,
                                       optimizer_->rule(), options.overlap, model_.params,
                                       std::vector<float>(n.begin(), n.end()), std::vector<float>(z.begin(), z.end()));
  } else if (options.schema == TrainSchema::Flow) {
    flow_ = std::make_unique<kernels::WideFlow>(model_.shape, options.flow, pool_->threads());
  }
  // The CUDA path keeps its gradient and touched flags on the GPU, and Hogwild updates the model
  // per sample: neither needs a model-sized gradient (for a Criteo-sized FFM, gigabytes to zero
  // before the first step).
  if (!cuda_ && !hogwild()) {
    grad_.resize(model_.params.size());
    stamp_.resize(std::size_t(model_.shape.num_features));
  }
}

WideTrainer::~WideTrainer() = default;
WideTrainer::WideTrainer(WideTrainer&&) noexcept = default;
WideTrainer& WideTrainer::operator=(WideTrainer&&) noexcept = default;

void WideTrainer::compute(const kernels::WideBatch& b, float* grad, float* logits) {
  if (flow_)
    flow_->gradient(b, model_.params.data(), grad, logits, *pool_);
  else
    kernels::wide_classical_gradient(model_.shape, b, model_.params.data(), grad, logits, *pool_);
}

// The batch's distinct feature ids, sorted (stamps avoid clearing a table per batch).
void WideTrainer::touched_features(const kernels::WideBatch& b) {
  if (++stamp_value_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0u);
    stamp_value_ = 1;
  }
  touched_.clear();
  for (std::int64_t e = b.row_ptr[0]; e < b.row_ptr[b.rows]; ++e) {
    const std::uint32_t f = b.index[e];
    if (stamp_[f] != stamp_value_) {
      stamp_[f] = stamp_value_;
      touched_.push_back(f);
    }
  }
  // Only the multi-rank union merge needs the list sorted.
  if (distributed()) std::sort(touched_.begin(), touched_.end());
}

std::vector<std::uint32_t> union_of_rows(comm::ProcessGroup& group, const std::vector<std::uint32_t>& rows,
                                         std::int64_t num_rows) {
  std::vector<std::int64_t> count{std::int64_t(rows.size())}, counts(std::size_t(group.size()));
  group.allgather(comm::view(count), comm::view(counts));
  std::vector<std::size_t> recv_counts(counts.begin(), counts.end());
  // Sent as int64 (the widest integer the process group carries): every uint32 row, including
  // those at and above 2^31, travels unchanged.
  std::vector<std::int64_t> mine(rows.begin(), rows.end()), all(comm::sum_counts(recv_counts));
  group.allgatherv(comm::view(mine), comm::view(all), recv_counts);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  // Back to uint32 rows: a row outside [0, num_rows) would index past the model on this rank.
  SKEW_CHECK(all.empty() || (all.front() >= 0 && all.back() < num_rows),
             "rank " << group.rank() << ": the ranks' touched model rows span [" << all.front() << ", " << all.back()
                     << "], outside the model's " << num_rows << " rows (ranks built different models?)");
  return std::vector<std::uint32_t>(all.begin(), all.end());
}

// Sums the dense gradient `grad` over the group. Only rows some rank touched (touched_, sorted)
// travel: the union of the ranks' feature lists is gathered, those rows packed and all-reduced
// with the loss totals; touched_ becomes the union.
void WideTrainer::synchronise(float* grad, double& loss_sum, std::int64_t& samples, std::int64_t& nonzeros) {
  if (!distributed()) return;
  comm::ProcessGroup& g = *group_;
  const std::vector<std::uint32_t> all = union_of_rows(g, touched_, model_.shape.num_features);
  const std::size_t row_len = std::size_t(model_.shape.row_len());
  std::vector<double> packed(4 + all.size() * row_len);
  packed[0] = grad[0];
  packed[1] = loss_sum;
  packed[2] = double(samples);
  packed[3] = double(nonzeros);
  for (std::size_t r = 0; r < all.size(); ++r)
    std::copy_n(grad + 1 + std::size_t(all[r]) * row_len, row_len, packed.begin() + std::ptrdiff_t(4 + r * row_len));
  g.allreduce(comm::view(packed), comm::ReduceOp::Sum);
  grad[0] = float(packed[0]);
  loss_sum = packed[1];
  samples = std::llround(packed[2]);
  nonzeros = std::llround(packed[3]);
  touched_.assign(all.begin(), all.end());
  for (std::size_t r = 0; r < all.size(); ++r)
    for (std::size_t j = 0; j < row_len; ++j)
      grad[1 + std::size_t(all[r]) * row_len + j] = float(packed[4 + r * row_len + j]);
}

// The flow schema on several ranks: the synchronisation works on the dense gradient and a sorted
// touched list, so the feature rows are written back into that form.
void WideTrainer::densify_sparse_gradient() {
  const std::int64_t row_len = model_.shape.row_len();
  grad_[0] += sparse_grad_.bias;
  touched_.clear();
  for (auto& part : sparse_grad_.parts) {
    for (std::size_t r = 0; r < part.features.size(); ++r)
      std::copy_n(part.folded_row(r, std::size_t(row_len)), row_len,
                  grad_.begin() + 1 + std::ptrdiff_t(part.features[r]) * row_len);
    touched_.insert(touched_.end(), part.features.begin(), part.features.end());
  }
  std::sort(touched_.begin(), touched_.end());
}

void WideTrainer::download_if_stale() {
  if (cuda_ && !host_params_newer_) {
    cuda_->download(model_.params);
    host_params_newer_ = true;
  }
}

void WideTrainer::upload_if_newer() {
  if (host_params_newer_) cuda_->upload(model_.params);
  host_params_newer_ = false;
}

WideModel& WideTrainer::model() {
  download_if_stale();
  model_.materialise(pool_->threads());
  return model_;
}

void WideTrainer::set_parameters(std::span<const float> values) {
  SKEW_CHECK(values.size() == model_.params.size(),
             "set_parameters: " << values.size() << " values for " << model_.params.size() << " parameters");
  download_if_stale();  // CUDA path: the next step uploads these
  model_.deferred = DeferredRows{};
  std::copy(values.begin(), values.end(), model_.params.begin());
}

void WideTrainer::ready_to_read(const SparseDataset& data) {
  download_if_stale();
  model_.write_rows_of(data, pool_->threads());
}

bool WideTrainer::hogwild() const {
  return runs_hogwild(options_, distributed() ? group_->size() : 1);
}

// The loss is progressive: each sample's logit before its own update, after the updates of the
// samples before it (the loss libFM and LIBFFM report while training).
StepResult WideTrainer::hogwild_step(const kernels::WideBatch& b) {
  logits_.resize(std::size_t(b.rows));
  Timer kernel_timer;
  kernels::wide_classical_hogwild(model_.shape, b, optimizer_->rule(), model_.params.data(), optimizer_->state(),
                                  logits_.data(), *pool_);
  const double kernel_seconds = kernel_timer.seconds();
  const double loss = logloss_sum(logits_.data(), b.label, std::size_t(b.rows));
  return StepResult{b.rows > 0 ? loss / double(b.rows) : 0.0, b.rows, b.nnz(), kernel_seconds};
}

namespace {

// logloss_sum over a batch with the terms (an exp and a log1p each) computed by the pool, then
// added in sample order: the same sum, bit for bit.
double pooled_logloss_sum(kernels::WidePool& pool, const float* logits, const float* labels, std::int64_t rows) {
  constexpr std::int64_t kRowsPerTask = 256;
  std::vector<double> terms(std::size_t(std::max<std::int64_t>(rows, 0)));
  pool.run((rows + kRowsPerTask - 1) / kRowsPerTask, [&](std::int64_t task, int) {
    for (std::int64_t i = task * kRowsPerTask; i < std::min(rows, (task + 1) * kRowsPerTask); ++i)
      terms[std::size_t(i)] = logloss_sum(logits + i, labels + i, 1);
  });
  double sum = 0;
  for (const double t : terms) sum += t;
  return sum;
}

}  // namespace

StepResult WideTrainer::step(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::int64_t next_begin,
                             std::int64_t next_end) {
  if (cuda_) return cuda_step(data, begin, end, next_begin, next_end);
  const StepResult result = step_rows(data.batch(begin, end));
  // The next batch's first sample's rows, fetched while the caller books this step: the kernels
  // fetch each next sample's rows themselves, but not the first's (FFM's batches are 32 samples).
  if (next_end > next_begin)
    kernels::wide_prefetch_sample_rows(data.batch(next_begin, next_end), model_.shape.row_len(), 0,
                                       model_.params.data(), nullptr, nullptr);
  return result;
}

StepResult WideTrainer::cuda_step(const SparseDataset& data, std::int64_t begin, std::int64_t end,
                                  std::int64_t next_begin, std::int64_t next_end) {
  const kernels::WideBatch b = data.batch(begin, end);
  upload_if_newer();
  double loss = 0;
  std::int64_t samples = b.rows, nonzeros = b.nnz();
  // Several ranks: the GPU hands over its dense gradient and touched flags, which become the
  // group's here, as on the CPU path.
  const auto exchange = [&](std::vector<float>& grad, std::vector<std::uint8_t>& touched,
                            const std::vector<float>& logits) {
    loss = logloss_sum(logits.data(), b.label, std::size_t(b.rows));
    touched_.clear();
    for (std::size_t f = 0; f < touched.size(); ++f)
      if (touched[f]) touched_.push_back(std::uint32_t(f));
    synchronise(grad.data(), loss, samples, nonzeros);
    std::fill(touched.begin(), touched.end(), std::uint8_t(0));
    for (std::uint32_t f : touched_) touched[f] = 1;
    return samples;
  };
  const double kernel_seconds =
      cuda_->step(data, begin, end, next_begin, next_end, logits_,
                  distributed() ? CudaStep::GradientExchange(exchange) : CudaStep::GradientExchange());
  if (!distributed()) loss = logloss_sum(logits_.data(), b.label, std::size_t(b.rows));
  return StepResult{samples > 0 ? loss / double(samples) : 0.0, samples, nonzeros, kernel_seconds};
}

StepResult WideTrainer::step_rows(const kernels::WideBatch& b) {
  if (!options_.profile) return cpu_step(b);
  Timer timer;
  pool_->mark_step();
  const StepResult r = cpu_step(b);
  pool_->end_step();
  ++profiled_steps_;
  profiled_seconds_ += timer.seconds();
  return r;
}

StepProfile WideTrainer::profile() const {
  return StepProfile{profiled_steps_, profiled_seconds_, pool_->passes()};
}

Json step_profile_json(const StepProfile& p) {
  const double per_step = 1e6 / double(std::max<std::int64_t>(1, p.steps));
  Json passes = Json::array();
  double in_passes = 0;
  for (const kernels::WidePoolPass& pass : p.passes) {
    Json cpu = Json::array();
    for (const double seconds : pass.cpu_seconds) cpu.push_back(seconds * per_step);
    passes.push_back(Json{{"runs", pass.runs}, {"wall_us", pass.wall_seconds * per_step}, {"thread_cpu_us", cpu}});
    in_passes += pass.wall_seconds;
  }
  return Json{{"steps", p.steps},
              {"step_us", p.step_seconds * per_step},
              {"passes", passes},
              {"outside_passes_us", (p.step_seconds - in_passes) * per_step}};
}

StepResult WideTrainer::cpu_step(const kernels::WideBatch& b) {
  SKEW_CHECK(!cuda_, "WideTrainer::step_rows takes rows on the CPU (train.device = cpu)");
  if (hogwild()) return hogwild_step(b);
  logits_.resize(std::size_t(b.rows));
  // The flow schema produces its touched features and their gradient rows itself; on one rank
  // its LR kernel applies the optimizer to them too (fused: no pass over them afterwards).
  const bool sparse = flow_ != nullptr;
  const bool fused = sparse && !distributed() && flow_->fuses_update() && b.rows > 0;
  if (!sparse) touched_features(b);
  Timer kernel_timer;
  if (sparse) {
    const kernels::WideFusedUpdate update =
        optimizer_->fused_update(model_.params.data(), 1.0f / float(std::max<std::int64_t>(b.rows, 1)));
    flow_->sparse_gradient(b, model_.params.data(), logits_.data(), *pool_, sparse_grad_, fused ? &update : nullptr);
  } else
    compute(b, grad_.data(), logits_.data());
  const double kernel_seconds = kernel_timer.seconds();
  // logloss_sum's terms, added in sample order: the LR flow kernel computed them beside the logits.
  double loss = 0;
  if (sparse && sparse_grad_.loss_terms.size() == std::size_t(b.rows))
    for (const double term : sparse_grad_.loss_terms) loss += term;
  else
    loss = pooled_logloss_sum(*pool_, logits_.data(), b.label, b.rows);
  std::int64_t samples = b.rows, nonzeros = b.nnz();
  if (sparse && distributed()) densify_sparse_gradient();
  synchronise(grad_.data(), loss, samples, nonzeros);
  if (samples > 0) {
    const float scale = 1.0f / float(samples);
    if (fused)
      optimizer_->step_bias(model_.params.data(), sparse_grad_.bias, scale);
    else if (sparse && !distributed())
      optimizer_->step(model_.params.data(), sparse_grad_, scale, *pool_);
    else
      optimizer_->step(model_.params.data(), grad_.data(), touched_, scale, *pool_);
  }
  return StepResult{samples > 0 ? loss / double(samples) : 0.0, samples, nonzeros, kernel_seconds};
}

void WideTrainer::gradient(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::vector<float>& grad,
                           std::vector<float>& logits) {
  if (cuda_) {
    upload_if_newer();
    return cuda_->gradient(data, begin, end, grad, logits);
  }
  ready_to_read(data);
  const kernels::WideBatch b = data.batch(begin, end);
  grad.assign(model_.params.size(), 0.0f);
  logits.assign(std::size_t(b.rows), 0.0f);
  compute(b, grad.data(), logits.data());
}

std::vector<float> WideTrainer::predict(const SparseDataset& data) {
  ready_to_read(data);
  std::vector<float> out(std::size_t(data.rows()));
  kernels::wide_forward(model_.shape, data.batch(0, data.rows()), model_.params.data(), out.data(), *pool_);
  for (auto& z : out) z = kernels::wide_sigmoid(z);
  return out;
}

Evaluation WideTrainer::evaluate(const SparseDataset& data) {
  ready_to_read(data);
  std::vector<float> logits(std::size_t(data.rows()));
  kernels::wide_forward(model_.shape, data.batch(0, data.rows()), model_.params.data(), logits.data(), *pool_);
  std::vector<double> totals{logloss_sum(logits.data(), data.label.data(), logits.size()), double(data.rows())};
  std::vector<float> scores = logits, labels = data.label;
  if (distributed()) {
    group_->allreduce(comm::view(totals), comm::ReduceOp::Sum);
    std::vector<std::int64_t> n{data.rows()}, all_n(std::size_t(group_->size()));
    group_->allgather(comm::view(n), comm::view(all_n));
    std::vector<std::size_t> counts(all_n.begin(), all_n.end());
    scores.resize(comm::sum_counts(counts));
    labels.resize(scores.size());
    group_->allgatherv(comm::view(logits), comm::view(scores), counts);
    group_->allgatherv(comm::cview(data.label), comm::view(labels), counts);
  }
  Evaluation e;
  e.samples = std::llround(totals[1]);
  e.logloss = e.samples > 0 ? totals[0] / totals[1] : 0.0;
  e.auc = roc_auc(scores, labels);
  return e;
}

}  // namespace skew::wide
