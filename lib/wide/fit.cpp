#include "lib/wide/fit.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/timer.hpp"
#include "lib/wide/checkpoint.hpp"
#include "lib/wide/fit_data.hpp"
#include "lib/wide/memory_budget.hpp"

namespace skew::wide {

ReadOptions read_options(const Config& c, const comm::ProcessGroup& world, int threads) {
  ReadOptions o;
  o.format = c.get_string("data.format");
  o.skip_bad_lines = c.get_bool("data.skip_bad_lines");
  o.use_cache = c.get_bool("data.cache");
  o.hash_bits = c.get_int_as<int>("data.hash_bits");
  o.threads = threads;
  o.rank = world.rank();
  o.world = world.size();
  return o;
}

namespace {

// train.lr, or for 0 the model's default. Instance-normalised FM/FFM inputs are about 1/sqrt(39)
// of the raw ones on Criteo-like rows, and their pairwise terms shrink with its square: they
// want larger steps than LR (on a synthetic development set: LR best at 0.05, FM at 0.1, FFM
// at 0.5; LR at 0.2 and FM at 0.2 overfit after epoch 2-3).
float learning_rate(const Config& c) {
  const double lr = c.get_float("train.lr");
  if (lr > 0) return float(lr);
  const kernels::WideKind kind = kernels::wide_kind_from_name(c.get_string("model.type"));
  return kind == kernels::WideKind::LR ? 0.05f : kind == kernels::WideKind::FM ? 0.1f : 0.5f;
}

TrainOptions train_options(const Config& c, int threads) {
  TrainOptions o;
  o.schema = schema_from_name(c.get_string("train.schema"));
  o.classical_sync = classical_sync_from_name(c.get_string("train.classical_sync"));
  o.device = device_from_name(c.get_string("train.device"));
  o.overlap = c.get_bool("train.overlap");
  o.threads = threads;
  o.optimizer.kind = optimizer_from_name(c.get_string("train.optimizer"));
  o.optimizer.lr = learning_rate(c);
  o.optimizer.l2 = float(c.get_float("train.l2"));
  o.optimizer.l1 = float(c.get_float("train.l1"));
  o.optimizer.beta = float(c.get_float("train.ftrl_beta"));
  o.flow.tile_samples = c.get_int_as<int>("train.tile_samples");
  o.flow.hot_features = c.get_int("train.hot_features");
  o.flow.replica_budget_bytes = c.get_int("train.replica_budget_mb") << 20;
  return o;
}

// A step's rows: [begin, end) of *data, and the next step's [next_begin, next_end); of `loading`
// instead while data.train loads beside the first epoch.
struct Batch {
  const SparseDataset* data = nullptr;
  std::int64_t begin = 0, end = 0, next_begin = 0, next_end = 0;
  const OverlappedLoad* loading = nullptr;
};

// What train_epoch works with, fixed for the run.
struct EpochLoop {
  WideTrainer& trainer;
  std::function<Batch(std::int64_t step)> batch;  // step s's rows on this rank
  std::int64_t steps, local_batch, log_every;
  JsonlWriter& metrics;  // disabled on ranks other than 0 and without output.dir
  WideCheckpoint& checkpoint;
  std::function<void()> settle_data;  // before a checkpoint: data.train's overlapped load checked whole
};

// The rest of epoch st.epoch from step st.step_in_epoch on, each rank taking its local_batch rows
// of every global mini-batch; a progress line (rank 0) and a metrics record every log_every
// global steps, a checkpoint every checkpoint.interval() (but the epoch's last step: the
// epoch-end checkpoint follows it, with the validation's outcome).
void train_epoch(EpochLoop& loop, WideRunState& st, const Timer& epoch_timer) {
  const std::int64_t interval = loop.checkpoint.interval();
  for (std::int64_t s = st.step_in_epoch; s < loop.steps; ++s) {
    const Batch b = loop.batch(s);
    const StepResult r = b.loading ? loop.trainer.step_rows(b.loading->batch(b.begin, b.end))
                                   : loop.trainer.step(*b.data, b.begin, b.end, b.next_begin, b.next_end);
    // The loss is the group's (summed over ranks), so every rank stops here together.
    SKEW_CHECK(std::isfinite(r.loss), "epoch " << st.epoch << " step " << s + 1 << ": the training loss is " << r.loss
                                               << ": the model diverged (try a smaller train.lr)");
    st.epoch_loss_sum += r.loss * double(r.samples);
    st.epoch_samples += r.samples;
    st.total_nonzeros += r.nonzeros;
    st.window_loss += r.loss;
    ++st.window_steps;
    ++st.global_step;
    st.step_in_epoch = s + 1;
    if (st.global_step % loop.log_every == 0) {
      const double rate = double(st.epoch_samples) / (st.epoch_seconds + epoch_timer.seconds());
      const double loss = st.window_loss / double(st.window_steps);
      SKEW_INFO("epoch " << st.epoch << " step " << s + 1 << "/" << loop.steps << " loss " << loss << " samples/s "
                         << std::llround(rate));
      loop.metrics.write(
          Json{{"step", st.global_step}, {"epoch", st.epoch}, {"train_loss", loss}, {"samples_per_s", rate}});
      st.window_loss = 0;
      st.window_steps = 0;
    }
    if (interval > 0 && st.global_step % interval == 0 && s + 1 < loop.steps) {
      loop.settle_data();
      WideRunState saved = st;
      saved.epoch_seconds += epoch_timer.seconds();
      loop.checkpoint.save(loop.trainer, saved);
    }
  }
}

// The identity a checkpoint must share with the run resuming from it (lib/wide/checkpoint.hpp).
RunIdentity run_identity(const Config& c, const kernels::WideShape& shape, std::int64_t steps) {
  return {{"model.type", c.get_string("model.type")},
          {"model.k", std::to_string(shape.k)},
          {"model.features", std::to_string(shape.num_features)},
          {"fields in data.train/data.valid", std::to_string(shape.num_fields)},
          {"train.optimizer", c.get_string("train.optimizer")},
          {"train.renumber", c.get_bool("train.renumber") ? "true" : "false"},
          {"train.normalize (resolved)", normalize_for(c, shape.kind) ? "on" : "off"},
          {"data.hash_bits", std::to_string(c.get_int("data.hash_bits"))},
          {"steps per epoch (data.train rows / train.batch_size)", std::to_string(steps)}};
}

// Set-up's seconds by part; startup is the process's age when fit() begins, total its age at the
// first training step.
struct SetupTimes {
  double startup = 0, data = 0, model = 0, trainer = 0, total = 0;
};

// fit(), with data.train loading beside the first epoch where `overlap_allowed` and
// data.load_overlap's conditions allow.
Json fit_run(const Config& c, const std::shared_ptr<comm::ProcessGroup>& world, bool overlap_allowed) {
  Timer total;
  // Set-up, from the command to the first training step: the process's start (MPI, the config),
  // the data, the model's initial values and the trainer's state, timed in turn.
  SetupTimes setup;
  setup.startup = log::seconds_since_start();
  const int rank = world->rank(), ranks = world->size();
  const int threads = c.get_int_as<int>("train.threads");
  Data data = load_data(c, *world, threads, overlap_allowed);
  start_overlapped_load(data);
  setup.data = total.seconds();
  // A streamed run's data.max_memory_mb counts the process as it stands before the model is made.
  const std::int64_t baseline_bytes = data.streamed ? settled_resident_bytes() : 0;
  const kernels::WideShape& shape = data.shape;
  const std::int64_t global_batch = c.get_int("train.batch_size");
  SKEW_CHECK(global_batch >= ranks,
             "train.batch_size = " << global_batch << " is smaller than the " << ranks << " ranks");
  const std::int64_t local_batch = global_batch / ranks;
  // Every rank takes as many steps as the rank with the fewest rows: the steps are collective.
  std::vector<std::int64_t> steps{(data.train_rows + local_batch - 1) / local_batch};
  world->allreduce(comm::view(steps), comm::ReduceOp::Min);
  SKEW_CHECK(steps[0] > 0, "data.train " << c.get_string("data.train") << " leaves a rank without rows ("
                                         << data.report.total_rows << " rows for " << ranks
                                         << " ranks): nothing to train on");
  WideCheckpoint checkpoint(c, *world, run_identity(c, shape, steps[0]));  // refuses train.device = cuda
  Timer part;
  WideModel initial =
      WideModel::create(shape, c.get_int_as<std::uint64_t>("model.seed"), float(c.get_float("model.init_std")), threads,
                        data.rows_read.empty() ? nullptr : &data.rows_read);
  setup.model = part.seconds();
  part.reset();
  WideTrainer trainer(std::move(initial), train_options(c, threads), world);
  setup.trainer = part.seconds();
  WideRunState st;
  const bool resumed = checkpoint.restore(trainer, st);

  const std::string dir = c.get_string("output.dir");
  if (!dir.empty() && rank == 0) make_directories(dir);
  // A resumed run continues the metrics file it was writing, without the records of the steps
  // after its checkpoint (a run killed after it wrote them; they come again).
  const std::string metrics_path = rank == 0 && !dir.empty() ? dir + "/metrics.jsonl" : "";
  if (resumed) keep_jsonl_records_before(metrics_path, "step", st.global_step + 1);
  JsonlWriter metrics(metrics_path, resumed ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
  const int patience = c.get_int_as<int>("train.patience");

  // Where the best model goes (README, "Outputs"). With checkpoints (output.checkpoint_dir), at
  // every epoch that improves it: a checkpoint holds the latest parameters, not the best, so a
  // resumed run finds the best epoch only in that file. Without them a crash ends the run (there
  // is nothing to resume), so the best epoch's parameters are kept in memory and written once,
  // when training ends, stops early or fails: FFM's 1.2 GB model takes longer to write than an
  // epoch takes to train.
  std::string model_path = c.get_string("output.model");
  if (model_path.empty() && !dir.empty()) model_path = dir + "/model.safetensors";
  double valid_seconds = 0, save_seconds = 0;  // this run's, beside its train_seconds
  std::int64_t model_writes = 0;
  WideParams best_params;  // the best epoch's, held while another epoch trains
  bool best_unwritten = false, best_is_latest = false;
  const auto write_model = [&](const WideParams& params) {
    Timer save_timer;
    WideModel saved;
    saved.shape = shape;
    saved.params = data.renumber ? data.order.to_original(shape, params) : params;
    saved.normalized = data.normalize;
    saved.hash_bits = c.get_int_as<int>("data.hash_bits");
    saved.save(model_path, {{"schema", c.get_string("train.schema")}, {"epoch", std::to_string(st.best_epoch)}});
    save_seconds += save_timer.seconds();
    ++model_writes;
    best_unwritten = false;
  };
  const auto write_unwritten_best = [&] {
    if (best_unwritten) write_model(best_is_latest ? trainer.parameters() : best_params);
  };
  // The epoch just trained is the best so far. `another_epoch_follows`: its parameters are then
  // copied, since the next epoch changes the trainer's (and may be worse, or fail); after the
  // last epoch the trainer's own are written.
  const auto keep_best = [&](bool another_epoch_follows) {
    st.best_epoch = st.epoch;
    if (model_path.empty() || rank != 0) return;
    if (checkpoint.enabled()) return write_model(trainer.parameters());
    best_unwritten = true;
    best_is_latest = !another_epoch_follows;
    if (another_epoch_follows) {
      Timer copy_timer;
      best_params = trainer.parameters();  // after the first, into the same pages: no faults
      save_seconds += copy_timer.seconds();
    }
  };
  const std::int64_t epochs = c.get_int("train.epochs");
  std::unique_ptr<StreamBatches> stream_batches;
  if (data.streamed)  // keep_best copies the parameters when another epoch follows
    stream_batches = training_stream(c, data, trainer, local_batch, baseline_bytes,
                                     rank == 0 && !model_path.empty() && !checkpoint.enabled() && epochs > 1);
  const auto in_memory_batch = [&](std::int64_t s) {
    const std::int64_t rows = data.train.rows(), begin = std::min(rows, s * local_batch),
                       end = std::min(rows, begin + local_batch);
    if (data.overlapped) data.overlapped->wait_rows(end);
    return Batch{&data.train,          begin, end, end, s + 1 < steps[0] ? std::min(rows, end + local_batch) : end,
                 data.overlapped.get()};
  };
  const auto streamed_batch = [&](std::int64_t s) {
    Batch b;
    SKEW_CHECK(stream_batches->next(b.data, b.begin, b.end), c.get_string("data.train")
                                                                 << " ended before step " << s + 1
                                                                 << " of its epoch: it changed while training");
    b.next_begin = b.next_end = b.end;  // the next batch may be in a chunk not read yet
    return b;
  };
  EpochLoop loop{trainer,
                 data.stream ? std::function<Batch(std::int64_t)>(streamed_batch) : in_memory_batch,
                 steps[0],
                 local_batch,
                 c.get_int("train.log_every"),
                 metrics,
                 checkpoint,
                 [&] { settle_overlapped_load(data); }};
  // A run resumed after its early stop stays stopped.
  const auto stopped_early = [&] { return patience > 0 && st.since_best >= patience; };
  setup.total = log::seconds_since_start();
  SKEW_INFO("set-up: " << setup.total << " s from the start to the first training step (start " << setup.startup
                       << " s, data " << setup.data << " s, model init " << setup.model << " s, trainer state "
                       << setup.trainer << " s)");
  try {
    while (st.epoch <= epochs && !stopped_early()) {
      Timer epoch_timer;
      if (stream_batches) {  // only epoch-end checkpoints: a streamed epoch starts at the file's start
        SKEW_CHECK(st.step_in_epoch == 0, "a streamed epoch cannot resume at step " << st.step_in_epoch);
        stream_batches->rewind();
      }
      train_epoch(loop, st, epoch_timer);
      const double waited = data.load_wait_seconds;
      settle_overlapped_load(data);  // its checksum's verdict before anything is validated or written
      // Waiting for rows is the data's time, as a load before training is: not the epoch's.
      const double epoch_seconds = st.epoch_seconds + epoch_timer.seconds() - (data.load_wait_seconds - waited);
      st.train_seconds += epoch_seconds;
      st.total_samples += st.epoch_samples;
      st.epochs_run = st.epoch;
      Json record{{"step", st.global_step},
                  {"epoch", st.epoch},
                  {"train_logloss", st.epoch_loss_sum / double(std::max<std::int64_t>(1, st.epoch_samples))}};
      if (!data.has_valid) {
        keep_best(st.epoch < epochs);
      } else {
        Timer valid_timer;
        const Evaluation v = trainer.evaluate(data.valid);
        valid_seconds += valid_timer.seconds();
        // The last step's update can diverge after its own (finite) loss was taken.
        SKEW_CHECK(std::isfinite(v.logloss) && !std::isnan(v.auc),
                   "epoch " << st.epoch << ": the validation logloss is " << v.logloss << " and AUC " << v.auc
                            << ": the model diverged (try a smaller train.lr)");
        record["valid_logloss"] = v.logloss;
        record["valid_auc"] = v.auc;
        record["elapsed_s"] = total.seconds();  // since start, data loading included: time-to-AUC
        record["train_s"] = st.train_seconds;   // the epochs' training steps only: schema comparisons
        SKEW_INFO("epoch " << st.epoch << " train logloss " << record["train_logloss"].get<double>()
                           << " valid logloss " << v.logloss << " auc " << v.auc << " (" << epoch_seconds << " s)");
        if (v.logloss < st.best_loss) {
          st.best_loss = v.logloss;
          st.best_auc = v.auc;
          keep_best(st.epoch < epochs);
          st.since_best = 0;
        } else if (patience > 0) {
          ++st.since_best;
        }
      }
      metrics.write(record);
      if (stopped_early())
        SKEW_INFO("early stop: no better validation logloss for " << patience << " epoch(s); keeping epoch "
                                                                  << st.best_epoch);
      // The next epoch starts afresh: checkpointed here, a resume begins it from its first step.
      ++st.epoch;
      st.step_in_epoch = st.epoch_samples = st.window_steps = 0;
      st.epoch_loss_sum = st.window_loss = st.epoch_seconds = 0;
      checkpoint.save(trainer, st);
    }
  } catch (...) {
    write_unwritten_best();  // a run that diverges or fails keeps its best epoch, as with checkpoints
    throw;
  }
  write_unwritten_best();
  Json summary{{"app", "wide_train"},
               {"model", c.get_string("model.type")},
               {"schema", c.get_string("train.schema")},
               {"device", c.get_string("train.device")},
               {"ranks", ranks},
               {"threads", threads},
               {"features", shape.num_features},
               {"normalize", data.normalize},
               {"epochs_run", st.epochs_run},
               {"best_epoch", st.best_epoch},
               {"valid_logloss", data.has_valid ? st.best_loss : 0.0},
               {"valid_auc", st.best_auc},
               {"train_samples_per_s", double(st.total_samples) / std::max(1e-9, st.train_seconds)},
               {"train_nonzeros_per_s", double(st.total_nonzeros) / std::max(1e-9, st.train_seconds)},
               {"train_rows_skipped", data.report.skipped_lines},
               {"data_seconds", data.report.seconds},
               {"data_load_overlapped", data.load_overlapped},
               {"data_wait_seconds", data.load_wait_seconds},
               {"seconds", total.seconds()},
               {"model_path", model_path},
               {"resumed", resumed},
               {"streamed", data.stream != nullptr},
               {"setup_seconds", setup.total},
               {"setup_startup_seconds", setup.startup},
               {"setup_data_seconds", setup.data},
               {"setup_model_seconds", setup.model},
               {"setup_trainer_seconds", setup.trainer},
               {"valid_seconds", valid_seconds},
               {"save_seconds", save_seconds},
               {"model_writes", model_writes}};
  // The memory traffic of a training row if no touched row stays in the caches: with a measured
  // memory bandwidth, the rows/s bound beside train_samples_per_s (scripts/bench_wide_table.sh).
  if (st.total_samples > 0)
    summary["bytes_per_row"] = kernels::wide_row_traffic(shape, double(st.total_nonzeros) / double(st.total_samples),
                                                         model_shaped_arrays(trainer.options(), ranks))
                                   .total();
  summary["peak_rss_bytes"] = process_memory().peak;  // VmHWM: the process's most, data.max_memory_mb's measure
  if (data.stream) {                                  // the ring's bound and what it held at most (lib/wide/stream.hpp)
    summary["stream_held_bytes"] = data.stream_held_bytes;  // the rest of the run, as counted (RunMemory)
    summary["stream_ring_budget_bytes"] = data.stream->ring_budget();
    summary["stream_peak_ring_bytes"] = data.stream->peak_ring_bytes();
    summary["stream_chunks_read"] = data.stream->chunks_read();
  }
  metrics.close();  // checked: a failed last write is an error, not a stderr line
  if (rank == 0 && !dir.empty()) write_file_atomic(dir + "/summary.json", summary.dump() + "\n");
  return summary;
}

}  // namespace

Json fit(const Config& c, const std::shared_ptr<comm::ProcessGroup>& world) {
  try {
    return fit_run(c, world, true);
  } catch (const DamagedCacheError& e) {
    // Rows of the damaged cache were trained on: start over, loading first, which re-parses the
    // text and rewrites the cache (its warning said so).
    SKEW_WARN(e.what() << " after training began on its rows: starting the run over from the text");
    return fit_run(c, world, false);
  }
}

}  // namespace skew::wide
