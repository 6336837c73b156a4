#include "lib/wide/fit.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "core/memory_limits.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "lib/wide/best_model.hpp"
#include "lib/wide/checkpoint.hpp"
#include "lib/wide/fit_data.hpp"
#include "lib/wide/memory_budget.hpp"
#include "lib/wide/trainer_options.hpp"

namespace skew::wide {

namespace {

// The identity a checkpoint must share with the run resuming from it (lib/wide/checkpoint.hpp).
RunIdentity run_identity(const WideOptions& o, const Data& data, std::int64_t steps) {
  const kernels::WideShape& shape = data.shape;
  return {{"model.type", kernels::wide_kind_name(o.model.type)},
          {"model.k", std::to_string(shape.k)},
          {"model.features", std::to_string(shape.num_features)},
          {"fields in data.train/data.valid", std::to_string(shape.num_fields)},
          {"train.optimizer", optimizer_name(o.train.optimizer)},
          {"train.renumber", o.train.renumber ? "true" : "false"},
          {"train.normalize (resolved)", data.normalize ? "on" : "off"},
          {"data.hash_bits", std::to_string(o.data.hash_bits)},
          {"steps per epoch (data.train rows / train.batch_size)", std::to_string(steps)}};
}

// A step's rows: [begin, end) of *data, and the next step's [next_begin, next_end); of `loading`
// instead while data.train loads beside the first epoch.
struct Batch {
  const SparseDataset* data = nullptr;
  std::int64_t begin = 0, end = 0, next_begin = 0, next_end = 0;
  const OverlappedLoad* loading = nullptr;
};

// Set-up's seconds by part; startup is the process's age when fit() begins, total its age at the
// first training step.
struct SetupTimes {
  double startup = 0, data = 0, model = 0, trainer = 0, total = 0;
};

// One run of fit(): set up (data, model, trainer, outputs) on construction, then run() trains
// epoch after epoch until the last, an early stop or a failure, and returns the summary.
class FitRun {
 public:
  // With `overlap_allowed`, data.train may load beside the first epoch (data.load_overlap).
  FitRun(const WideOptions& options, std::shared_ptr<comm::ProcessGroup> world, bool overlap_allowed);
  Json run();

 private:
  void count_steps();
  void make_trainer();
  void open_outputs();
  bool stopped_early() const { return o_.train.patience > 0 && st_.since_best >= o_.train.patience; }
  void run_epoch();
  Batch batch(std::int64_t step);
  void train_steps(const Timer& epoch_timer);
  void record_progress(std::int64_t step, const Timer& epoch_timer);
  void end_epoch(const Timer& epoch_timer);
  void validate(Json& record, double epoch_seconds);
  void keep_best();
  Json summary() const;

  const WideOptions& o_;
  std::shared_ptr<comm::ProcessGroup> world_;
  const int rank_, ranks_;
  Timer total_;
  SetupTimes setup_;
  Data data_;
  std::int64_t baseline_bytes_ = 0;  // streamed: the process's resident memory before the model
  std::int64_t local_batch_ = 0, steps_ = 0;
  std::optional<WideCheckpoint> checkpoint_;
  std::unique_ptr<WideTrainer> trainer_;
  WideRunState st_;
  bool resumed_ = false;
  std::optional<JsonlWriter> metrics_;  // disabled on ranks other than 0 and without output.dir
  std::optional<BestModel> best_;
  std::unique_ptr<StreamBatches> stream_batches_;  // a streamed data.train's epochs
  double valid_seconds_ = 0;                       // this run's, beside its train_seconds
  std::unique_ptr<Progress> progress_;             // rank 0's line over all epochs' steps
};

// Set-up, from the command to the first training step: the process's start (MPI, the options),
// the data, the model's initial values and the trainer's state, timed in turn.
FitRun::FitRun(const WideOptions& o, std::shared_ptr<comm::ProcessGroup> world, bool overlap_allowed)
    : o_(o), world_(std::move(world)), rank_(world_->rank()), ranks_(world_->size()) {
  setup_.startup = log::seconds_since_start();
  // Before the data: a conflict of keys or a missing GPU should not wait for a load.
  check_checkpoint_options(o_.output, o_.train.device);
  require_device(o_.train.device);
  check_model_memory(o_, shape_from_keys(o_), true);  // before the data: a run that cannot fit stops now
  data_ = allocating("the rows of data.train " + o_.data.train + (o_.data.valid.empty() ? "" : " and data.valid"),
                     data_file_bytes(o_.data), [&] { return load_data(o_, *world_, overlap_allowed); });
  start_overlapped_load(data_);
  setup_.data = total_.seconds();
  // A streamed run's data.max_memory_mb counts the process as it stands before the model is made.
  baseline_bytes_ = data_.streamed ? settled_resident_bytes() : 0;
  count_steps();
  checkpoint_.emplace(o_.output, o_.train.device, *world_, run_identity(o_, data_, steps_));  // refuses cuda
  make_trainer();
  open_outputs();
  setup_.total = log::seconds_since_start();
  SKEW_INFO("set-up: " << setup_.total << " s from the start to the first training step (start " << setup_.startup
                       << " s, data " << setup_.data << " s, model init " << setup_.model << " s, trainer state "
                       << setup_.trainer << " s)");
}

// Each rank's share of a global mini-batch, and the steps of an epoch: every rank takes as many
// as the rank with the fewest rows, since the steps are collective.
void FitRun::count_steps() {
  const std::int64_t global_batch = batch_size(o_);
  SKEW_CHECK(global_batch >= ranks_,
             "train.batch_size = " << global_batch << " is smaller than the " << ranks_ << " ranks");
  local_batch_ = global_batch / ranks_;
  std::vector<std::int64_t> steps{(data_.train_rows + local_batch_ - 1) / local_batch_};
  world_->allreduce(comm::view(steps), comm::ReduceOp::Min);
  SKEW_CHECK(steps[0] > 0, "data.train " << o_.data.train << " leaves a rank without rows (" << data_.report.total_rows
                                         << " rows for " << ranks_ << " ranks): nothing to train on");
  steps_ = steps[0];
}

// The model's initial values and the trainer, or the checkpoint's with output.resume.
void FitRun::make_trainer() {
  Timer part;
  check_model_memory(o_, data_.shape, false);  // the data gave the whole shape
  const kernels::WideShape& shape = data_.shape;
  const double param_bytes = double(shape.num_params()) * sizeof(float);
  const std::string table =
      std::to_string(shape.num_features) + " features x " + std::to_string(shape.row_len()) + " floats";
  WideModel initial = allocating("the model's parameters (" + table + ")", param_bytes, [&] {
    return WideModel::create(shape, o_.model.seed, float(o_.model.init_std), o_.train.threads,
                             data_.rows_read.empty() ? nullptr : &data_.rows_read);
  });
  setup_.model = part.seconds();
  part.reset();
  trainer_ = allocating("the trainer's optimizer state and buffers (" + table + " each)", param_bytes, [&] {
    return std::make_unique<WideTrainer>(std::move(initial), trainer_options(o_, ranks_), world_);
  });
  setup_.trainer = part.seconds();
  resumed_ = checkpoint_->restore(*trainer_, st_);
}

// output.dir, the metrics file, where the best model goes and, streamed, the training ring.
void FitRun::open_outputs() {
  const std::string& dir = o_.output.dir;
  if (!dir.empty() && rank_ == 0) make_directories(dir);
  // A resumed run continues the metrics file it was writing, without the records of the steps
  // after its checkpoint (a run killed after it wrote them; they come again).
  const std::string metrics_path = rank_ == 0 && !dir.empty() ? dir + "/metrics.jsonl" : "";
  if (resumed_) keep_jsonl_records_before(metrics_path, "step", st_.global_step + 1);
  metrics_.emplace(metrics_path, resumed_ ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
  std::string model_path = o_.output.model;
  if (model_path.empty() && !dir.empty()) model_path = dir + "/model.safetensors";
  best_.emplace(model_path, rank_ == 0, checkpoint_->enabled(), data_, o_);
  if (data_.streamed)
    stream_batches_ = training_stream(o_.data, data_, *trainer_, local_batch_, baseline_bytes_,
                                      best_->copies_parameters(o_.train.epochs));
}

Json FitRun::run() {
  progress_ = std::make_unique<Progress>("wide_train", st_.global_step, o_.train.epochs * steps_, "steps", rank_ == 0);
  try {
    while (st_.epoch <= o_.train.epochs && !stopped_early()) run_epoch();  // a resumed early stop stays stopped
  } catch (...) {
    best_->write_unwritten(*trainer_);  // a run that diverges or fails keeps its best epoch
    throw;
  }
  progress_.reset();  // its closing line before the summary's
  best_->write_unwritten(*trainer_);
  Json s = summary();
  metrics_->close();  // checked: a failed last write is an error, not a stderr line
  if (rank_ == 0 && !o_.output.dir.empty()) write_file_atomic(o_.output.dir + "/summary.json", s.dump() + "\n");
  return s;
}

void FitRun::run_epoch() {
  Timer epoch_timer;
  if (stream_batches_) {  // only epoch-end checkpoints: a streamed epoch starts at the file's start
    SKEW_CHECK(st_.step_in_epoch == 0, "a streamed epoch cannot resume at step " << st_.step_in_epoch);
    stream_batches_->rewind();
  }
  train_steps(epoch_timer);
  end_epoch(epoch_timer);
}

// Step s's rows on this rank.
Batch FitRun::batch(std::int64_t s) {
  if (data_.stream) {
    Batch b;
    SKEW_CHECK(stream_batches_->next(b.data, b.begin, b.end),
               o_.data.train << " ended before step " << s + 1 << " of its epoch: it changed while training");
    b.next_begin = b.next_end = b.end;  // the next batch may be in a chunk not read yet
    return b;
  }
  const std::int64_t rows = data_.train.rows(), begin = std::min(rows, s * local_batch_),
                     end = std::min(rows, begin + local_batch_);
  if (data_.overlapped) data_.overlapped->wait_rows(end);
  return Batch{&data_.train,          begin, end, end, s + 1 < steps_ ? std::min(rows, end + local_batch_) : end,
               data_.overlapped.get()};
}

// The rest of epoch st.epoch from step st.step_in_epoch on, each rank taking its local_batch rows
// of every global mini-batch; a checkpoint every output.checkpoint_interval steps (but the
// epoch's last step: the epoch-end checkpoint follows it, with the validation's outcome).
void FitRun::train_steps(const Timer& epoch_timer) {
  const std::int64_t interval = checkpoint_->interval();
  for (std::int64_t s = st_.step_in_epoch; s < steps_; ++s) {
    const Batch b = batch(s);
    const StepResult r = b.loading ? trainer_->step_rows(b.loading->batch(b.begin, b.end))
                                   : trainer_->step(*b.data, b.begin, b.end, b.next_begin, b.next_end);
    // The loss is the group's (summed over ranks), so every rank stops here together.
    SKEW_CHECK(std::isfinite(r.loss), "epoch " << st_.epoch << " step " << s + 1 << ": the training loss is " << r.loss
                                               << ": the model diverged (try a smaller train.lr)");
    st_.epoch_loss_sum += r.loss * double(r.samples);
    st_.epoch_samples += r.samples;
    st_.total_nonzeros += r.nonzeros;
    st_.window_loss += r.loss;
    ++st_.window_steps;
    ++st_.global_step;
    st_.step_in_epoch = s + 1;
    progress_->update(st_.global_step);
    if (st_.global_step % o_.train.log_every == 0) record_progress(s, epoch_timer);
    if (interval > 0 && st_.global_step % interval == 0 && s + 1 < steps_) {
      settle_overlapped_load(data_);  // data.train's overlapped load checked whole first
      WideRunState saved = st_;
      saved.epoch_seconds += epoch_timer.seconds();
      checkpoint_->save(*trainer_, saved);
    }
  }
}

// A progress line (rank 0) and a metrics record every train.log_every global steps.
void FitRun::record_progress(std::int64_t s, const Timer& epoch_timer) {
  const double rate = double(st_.epoch_samples) / (st_.epoch_seconds + epoch_timer.seconds());
  const double loss = st_.window_loss / double(st_.window_steps);
  SKEW_INFO("epoch " << st_.epoch << " step " << s + 1 << "/" << steps_ << " loss " << loss << " samples/s "
                     << std::llround(rate));
  metrics_->write(Json{{"step", st_.global_step}, {"epoch", st_.epoch}, {"train_loss", loss}, {"samples_per_s", rate}});
  st_.window_loss = 0;
  st_.window_steps = 0;
}

// The epoch's record, its validation and the best model, then the epoch-end checkpoint.
void FitRun::end_epoch(const Timer& epoch_timer) {
  const double waited = data_.load_wait_seconds;
  settle_overlapped_load(data_);  // its checksum's verdict before anything is validated or written
  // Waiting for rows is the data's time, as a load before training is: not the epoch's.
  const double epoch_seconds = st_.epoch_seconds + epoch_timer.seconds() - (data_.load_wait_seconds - waited);
  st_.train_seconds += epoch_seconds;
  st_.total_samples += st_.epoch_samples;
  st_.epochs_run = st_.epoch;
  Json record{{"step", st_.global_step},
              {"epoch", st_.epoch},
              {"train_logloss", st_.epoch_loss_sum / double(std::max<std::int64_t>(1, st_.epoch_samples))}};
  if (data_.has_valid)
    validate(record, epoch_seconds);
  else
    keep_best();
  metrics_->write(record);
  if (stopped_early())
    SKEW_INFO("early stop: no better validation logloss for " << o_.train.patience << " epoch(s); keeping epoch "
                                                              << st_.best_epoch);
  // The next epoch starts afresh: checkpointed here, a resume begins it from its first step.
  ++st_.epoch;
  st_.step_in_epoch = st_.epoch_samples = st_.window_steps = 0;
  st_.epoch_loss_sum = st_.window_loss = st_.epoch_seconds = 0;
  checkpoint_->save(*trainer_, st_);
}

// The epoch just trained is the best so far: the best model keeps it.
void FitRun::keep_best() {
  st_.best_epoch = st_.epoch;
  best_->keep(*trainer_, st_.epoch, st_.epoch < o_.train.epochs);
}

// data.valid's logloss and AUC into `record`; a better logloss is the best epoch so far, else
// a step towards the early stop.
void FitRun::validate(Json& record, double epoch_seconds) {
  Timer valid_timer;
  const Evaluation v = trainer_->evaluate(data_.valid);
  valid_seconds_ += valid_timer.seconds();
  // The last step's update can diverge after its own (finite) loss was taken.
  SKEW_CHECK(std::isfinite(v.logloss) && !std::isnan(v.auc),
             "epoch " << st_.epoch << ": the validation logloss is " << v.logloss << " and AUC " << v.auc
                      << ": the model diverged (try a smaller train.lr)");
  record["valid_logloss"] = v.logloss;
  record["valid_auc"] = v.auc;
  record["elapsed_s"] = total_.seconds();  // since start, data loading included: time-to-AUC
  record["train_s"] = st_.train_seconds;   // the epochs' training steps only: schema comparisons
  SKEW_INFO("epoch " << st_.epoch << " train logloss " << record["train_logloss"].get<double>() << " valid logloss "
                     << v.logloss << " auc " << v.auc << " (" << epoch_seconds << " s)");
  if (v.logloss < st_.best_loss) {
    st_.best_loss = v.logloss;
    st_.best_auc = v.auc;
    keep_best();
    st_.since_best = 0;
  } else if (o_.train.patience > 0) {
    ++st_.since_best;
  }
}

Json FitRun::summary() const {
  const kernels::WideShape& shape = data_.shape;
  Json summary{{"app", "wide_train"},
               {"model", kernels::wide_kind_name(o_.model.type)},
               {"schema", schema_name(o_.train.schema)},
               {"device", device_name(o_.train.device)},
               {"ranks", ranks_},
               {"threads", o_.train.threads},
               {"features", shape.num_features},
               {"normalize", data_.normalize},
               {"epochs_run", st_.epochs_run},
               {"best_epoch", st_.best_epoch},
               {"valid_logloss", data_.has_valid ? st_.best_loss : 0.0},
               {"valid_auc", st_.best_auc},
               {"train_samples_per_s", double(st_.total_samples) / std::max(1e-9, st_.train_seconds)},
               {"train_nonzeros_per_s", double(st_.total_nonzeros) / std::max(1e-9, st_.train_seconds)},
               {"train_rows_skipped", data_.report.skipped_lines},
               {"data_seconds", data_.report.seconds},
               {"data_load_overlapped", data_.load_overlapped},
               {"data_wait_seconds", data_.load_wait_seconds},
               {"seconds", total_.seconds()},
               {"model_path", best_->path()},
               {"resumed", resumed_},
               {"streamed", data_.stream != nullptr},
               {"setup_seconds", setup_.total},
               {"setup_startup_seconds", setup_.startup},
               {"setup_data_seconds", setup_.data},
               {"setup_model_seconds", setup_.model},
               {"setup_trainer_seconds", setup_.trainer},
               {"valid_seconds", valid_seconds_},
               {"save_seconds", best_->save_seconds()},
               {"model_writes", best_->writes_done()}};
  // The memory traffic of a training row if no touched row stays in the caches: with a measured
  // memory bandwidth, the rows/s bound beside train_samples_per_s (scripts/bench_wide_table.sh).
  if (st_.total_samples > 0)
    summary["bytes_per_row"] = kernels::wide_row_traffic(shape, double(st_.total_nonzeros) / double(st_.total_samples),
                                                         model_shaped_arrays(trainer_->options(), ranks_))
                                   .total();
  if (o_.train.profile) summary["step_profile"] = step_profile_json(trainer_->profile());
  summary["peak_rss_bytes"] = process_memory().peak;  // VmHWM: the process's most, data.max_memory_mb's measure
  if (data_.stream) {                                 // the ring's bound and what it held at most (lib/wide/stream.hpp)
    summary["stream_held_bytes"] = data_.stream_held_bytes;  // the rest of the run, as counted (RunMemory)
    summary["stream_ring_budget_bytes"] = data_.stream->ring_budget();
    summary["stream_peak_ring_bytes"] = data_.stream->peak_ring_bytes();
    summary["stream_chunks_read"] = data_.stream->chunks_read();
  }
  return summary;
}

}  // namespace

Json fit(const WideOptions& o, const std::shared_ptr<comm::ProcessGroup>& world) {
  try {
    return FitRun(o, world, /*overlap_allowed=*/true).run();
  } catch (const DamagedCacheError& e) {
    // The retry: rows of the damaged cache were trained on, so the run starts over, loading
    // first, which re-parses the text and rewrites the cache (its warning said so).
    SKEW_WARN(e.what() << " after training began on its rows: starting the run over from the text");
    return FitRun(o, world, /*overlap_allowed=*/false).run();
  }
}

}  // namespace skew::wide
