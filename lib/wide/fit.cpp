#include "lib/wide/fit.hpp"

#include <algorithm>
#include <cmath>

#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"
#include "lib/core/log.hpp"
#include "lib/core/metrics.hpp"
#include "lib/core/timer.hpp"
#include "lib/wide/checkpoint.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide {

namespace {
// Model rows are 32-bit in the kernels, and a model this wide is already 2^28 rows: beyond it
// the data should be hashed into fewer rows (data.hash_bits <= kMaxHashBits = 28).
constexpr std::int64_t kMaxModelFeatures = std::int64_t(1) << kMaxHashBits;
}  // namespace

Schema wide_train_schema() {
  Schema s("wide_train",
           "Train LR/FM/FFM on sparse data with the classical or flow (cuWide) schema; with --predict, score "
           "predict.data with the model in predict.model instead.");
  s.add_string("data.train", "synthetic:criteo?rows=20000&features=50000&alpha=1.1&seed=1",
               "training data: a libsvm/libffm file or synthetic:criteo?rows=N&features=F&alpha=A&seed=S");
  s.add_string("data.valid", "synthetic:criteo?rows=5000&features=50000&alpha=1.1&seed=1&first_row=1000000",
               "validation data (same forms); empty = no validation");
  s.add_choice("data.format", "auto", {"auto", "libsvm", "libffm"}, "text format (auto: .libffm/.ffm -> libffm)");
  s.add_bool("data.skip_bad_lines", false, "skip (and count) malformed lines instead of failing");
  s.add_bool("data.cache", true, "read/write a binary cache FILE.skewbin beside a text file");
  s.add_int("data.hash_bits", 0, {0, kMaxHashBits},
            "feature hashing: 0 = each (64-bit) feature id is its model row (ids up to 2^28 - 1); b > 0 = id maps to "
            "row fmix64(id ^ 0x9e3779b97f4a7c15) >> (64 - b) of a 2^b-row model (MurmurHash3's finaliser; the same "
            "row in every run and rank; the saved model records b for --predict)");
  s.add_choice("model.type", "fm", {"lr", "fm", "ffm"}, "model: logistic regression, FM or field-aware FM");
  s.add_int("model.k", 8, {1, 1024}, "latent dimension (FM/FFM)");
  s.add_int("model.features", 0, {0, kMaxModelFeatures}, "number of features; 0 = max index + 1 in the data");
  s.add_float("model.init_std", 0.01, FloatRange::at_least(0), "std of the initial latent factors");
  s.add_int("model.seed", 1, IntRange::at_least(0), "initialisation seed");
  s.add_choice("train.normalize", "auto", {"auto", "on", "off"},
               "scale each instance's values to unit L2 norm, in training, validation and --predict (the saved model "
               "records it): auto = on for FM/FFM (as LIBFFM and xLearn do), off for LR");
  s.add_choice("train.schema", "flow", {"classical", "flow"}, "training schema");
  s.add_choice("train.classical_sync", "hogwild", {"hogwild", "atomic"},
               "classical on the CPU, one rank: hogwild = per-sample updates shared by the threads without locks "
               "(libFM/LIBFFM style); atomic = a mini-batch gradient summed with atomic adds, one update per batch "
               "(several ranks and cuda always use the batch gradient)");
  s.add_choice("train.device", "cpu", {"cpu", "cuda"},
               "where to train: cpu (train.threads per rank) or cuda (one GPU per rank; validation on the CPU)");
  s.add_bool("train.overlap", true, "cuda: copy the next mini-batch to the GPU on a second stream while this one computes");
  s.add_choice("train.optimizer", "adagrad", {"sgd", "adagrad", "ftrl"}, "optimizer");
  s.add_float("train.lr", 0.0, FloatRange::at_least(0),
              "learning rate (FTRL: alpha); 0 = the model's default: 0.05 for LR, 0.1 for FM, 0.5 for FFM (AdaGrad, "
              "with train.normalize = auto; the best test logloss of a synthetic sweep)");
  s.add_float("train.l2", 1e-5, FloatRange::at_least(0), "L2 regularisation");
  s.add_float("train.l1", 0.0, FloatRange::at_least(0), "L1 (FTRL only)");
  s.add_float("train.ftrl_beta", 1.0, FloatRange::at_least(0), "FTRL beta");
  s.add_int("train.epochs", 5, {1, kMaxInt32}, "maximum number of epochs");
  s.add_int("train.batch_size", 1024, IntRange::at_least(1), "global mini-batch size (split evenly over ranks)");
  s.add_int("train.threads", 1, {1, 1024}, "worker threads per rank");
  s.add_int("train.patience", 2, {0, kMaxInt32}, "stop after this many epochs without a better validation logloss (0 = never)");
  s.add_choice("train.sync", "allreduce", {"allreduce"}, "multi-rank synchronisation of the gradient");
  s.add_bool("train.renumber", true, "renumber features by frequency (flow: hot features get small ids)");
  s.add_int("train.tile_samples", 256, {1, 1 << 20}, "flow: samples per tile");
  s.add_int("train.hot_features", 4096, {0, 1 << 30}, "flow: number of hottest features with cached, replicated accumulators");
  s.add_int("train.replica_budget_mb", 16, {0, 1 << 20},  // 1 TiB: MiB << 20 stays far inside int64
            "flow, LR on the CPU: if threads x features x 4 B fit in this many MiB, every feature is hot (0 = never)");
  s.add_int("train.log_every", 20, IntRange::at_least(1), "progress line and metrics record every N steps");
  s.add_string("output.dir", "", "directory for metrics.jsonl, summary.json and model.safetensors (empty = none)");
  s.add_string("output.model", "", "where the best model so far is saved, each time an epoch improves it (default OUTPUT_DIR/model.safetensors)");
  // The names and meanings of moe_train's checkpoint keys (lib/moe/schema.cpp).
  s.add_string("output.checkpoint_dir", "",
               "checkpoint directory (empty = none): model, optimizer state and the run's position, at every epoch end "
               "(CPU only; bit-exact resume at train.threads = 1)");
  s.add_int("output.checkpoint_interval", 0, IntRange::at_least(0),
            "steps between mid-epoch checkpoints (0 = only at the epoch ends)");
  s.add_int("output.keep", 2, {1, kMaxInt32}, "checkpoints kept");
  s.add_bool("output.resume", false, "resume from the newest complete checkpoint in output.checkpoint_dir");
  s.add_string("predict.model", "", "--predict: the model to load");
  s.add_string("predict.data", "", "--predict: the data to score");
  s.add_string("predict.output", "-", "--predict: output file, one probability per line ('-' = stdout)");
  return s;
}

namespace {

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

// The training and validation data, renumbered by frequency (counted over all ranks) when
// train.renumber is set, and the model shape they call for.
struct Data {
  SparseDataset train, valid;
  bool has_valid = false;
  ReadReport report;  // of the training data
  kernels::WideShape shape;
  bool renumber = false;
  FeatureOrder order;
  bool normalize = false;  // train.normalize resolved for the model type
};

// train.normalize for this model type: auto is on for the factorisation machines, whose pairwise
// terms grow with the square of an instance's scale, and off for LR.
bool normalize_for(const Config& c, kernels::WideKind kind) {
  const std::string mode = c.get_string("train.normalize");
  return mode == "auto" ? kind != kernels::WideKind::LR : mode == "on";
}

Data load_data(const Config& c, comm::ProcessGroup& world, int threads) {
  Data d;
  const ReadOptions ro = read_options(c, world, threads);
  SKEW_CHECK(!c.get_string("data.train").empty(),
             "data.train is empty: give a libsvm/libffm file or synthetic:criteo?rows=N&features=F");
  d.train = load_dataset(c.get_string("data.train"), ro, &d.report);
  d.has_valid = !c.get_string("data.valid").empty();
  if (d.has_valid) d.valid = load_dataset(c.get_string("data.valid"), ro);
  SKEW_INFO("data: " << d.train.rows() << " training rows on rank 0 (" << d.report.lines << " lines"
                     << (d.report.from_cache ? ", from cache" : "") << ", " << d.report.skipped_lines
                     << " skipped, " << d.report.seconds << " s)" << (d.has_valid ? ", validation " + std::to_string(d.valid.rows()) + " rows" : ""));

  kernels::WideShape& shape = d.shape;
  shape.kind = kernels::wide_kind_from_name(c.get_string("model.type"));
  shape.k = shape.kind == kernels::WideKind::LR ? 0 : c.get_int_as<int>("model.k");
  const std::int64_t data_features = std::max(d.train.num_features, d.valid.num_features);
  const std::int64_t model_features = c.get_int("model.features");
  shape.num_features = model_features > 0 ? model_features : data_features;
  SKEW_CHECK(data_features <= shape.num_features,
             (ro.hash_bits > 0 ? "data.hash_bits = " + std::to_string(ro.hash_bits) + " hashes the ids into rows up to "
                               : std::string("the data has feature ids up to "))
                 << data_features - 1 << " but model.features = " << shape.num_features);
  SKEW_CHECK(shape.num_features <= kMaxModelFeatures,
             (model_features > 0 ? "model.features = " + std::to_string(model_features)
                                 : "the data's feature ids reach " + std::to_string(data_features - 1) + ", a model of " +
                                       std::to_string(data_features) + " rows, which")
                 << " is too large (at most " << kMaxModelFeatures
                 << " rows); set data.hash_bits to hash the ids into fewer rows");
  shape.num_fields = std::max(d.train.num_fields, d.valid.num_fields);
  d.normalize = normalize_for(c, shape.kind);
  if (d.normalize) {
    normalize_instances(d.train);
    if (d.has_valid) normalize_instances(d.valid);
  }

  d.renumber = c.get_bool("train.renumber");
  if (d.renumber) {
    std::vector<std::int64_t> counts = feature_counts(d.train, shape.num_features);
    world.allreduce(comm::view(counts), comm::ReduceOp::Sum);
    d.order = FeatureOrder::by_frequency(counts);
    d.order.apply(d.train);
    if (d.has_valid) d.order.apply(d.valid);
  }
  return d;
}

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

// What train_epoch works with, fixed for the run.
struct EpochLoop {
  WideTrainer& trainer;
  const SparseDataset& train;
  std::int64_t steps, local_batch, log_every;
  JsonlWriter& metrics;  // disabled on ranks other than 0 and without output.dir
  WideCheckpoint& checkpoint;
};

// The rest of epoch st.epoch from step st.step_in_epoch on, each rank taking its local_batch rows
// of every global mini-batch; a progress line (rank 0) and a metrics record every log_every
// global steps, a checkpoint every checkpoint.interval() (but the epoch's last step: the
// epoch-end checkpoint follows it, with the validation's outcome).
void train_epoch(EpochLoop& loop, WideRunState& st, const Timer& epoch_timer) {
  const SparseDataset& train = loop.train;
  const std::int64_t interval = loop.checkpoint.interval();
  for (std::int64_t s = st.step_in_epoch; s < loop.steps; ++s) {
    const std::int64_t begin = std::min(train.rows(), s * loop.local_batch),
                       end = std::min(train.rows(), begin + loop.local_batch);
    const std::int64_t next_end = s + 1 < loop.steps ? std::min(train.rows(), end + loop.local_batch) : end;
    const StepResult r = loop.trainer.step(train, begin, end, end, next_end);
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
      loop.metrics.write(Json{{"step", st.global_step}, {"epoch", st.epoch}, {"train_loss", loss}, {"samples_per_s", rate}});
      st.window_loss = 0;
      st.window_steps = 0;
    }
    if (interval > 0 && st.global_step % interval == 0 && s + 1 < loop.steps) {
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

}  // namespace

Json fit(const Config& c, const std::shared_ptr<comm::ProcessGroup>& world) {
  Timer total;
  const int rank = world->rank(), ranks = world->size();
  const int threads = c.get_int_as<int>("train.threads");
  Data data = load_data(c, *world, threads);
  const kernels::WideShape& shape = data.shape;
  const std::int64_t global_batch = c.get_int("train.batch_size");
  SKEW_CHECK(global_batch >= ranks, "train.batch_size = " << global_batch << " is smaller than the " << ranks << " ranks");
  const std::int64_t local_batch = global_batch / ranks;
  // Every rank takes as many steps as the rank with the fewest rows: the steps are collective.
  std::vector<std::int64_t> steps{(data.train.rows() + local_batch - 1) / local_batch};
  world->allreduce(comm::view(steps), comm::ReduceOp::Min);
  SKEW_CHECK(steps[0] > 0, "data.train " << c.get_string("data.train") << " leaves a rank without rows ("
                                         << data.report.total_rows << " rows for " << ranks
                                         << " ranks): nothing to train on");
  WideCheckpoint checkpoint(c, *world, run_identity(c, shape, steps[0]));  // refuses train.device = cuda
  WideTrainer trainer(WideModel::create(shape, c.get_int_as<std::uint64_t>("model.seed"), float(c.get_float("model.init_std")), threads),
                      train_options(c, threads), world);
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

  // The best model so far is saved (atomically) whenever an epoch improves it: a crash or a
  // kill later in the run keeps it.
  std::string model_path = c.get_string("output.model");
  if (model_path.empty() && !dir.empty()) model_path = dir + "/model.safetensors";
  const auto save_best = [&] {
    st.best_epoch = st.epoch;
    if (model_path.empty() || rank != 0) return;
    const std::vector<float>& params = trainer.parameters();
    WideModel saved{shape, data.renumber ? data.order.to_original(shape, params) : params, data.normalize,
                    c.get_int_as<int>("data.hash_bits")};
    saved.save(model_path, {{"schema", c.get_string("train.schema")}, {"epoch", std::to_string(st.best_epoch)}});
  };
  EpochLoop loop{trainer, data.train, steps[0], local_batch, c.get_int("train.log_every"), metrics, checkpoint};
  const std::int64_t epochs = c.get_int("train.epochs");
  // A run resumed after its early stop stays stopped.
  const auto stopped_early = [&] { return patience > 0 && st.since_best >= patience; };
  while (st.epoch <= epochs && !stopped_early()) {
    Timer epoch_timer;
    train_epoch(loop, st, epoch_timer);
    const double epoch_seconds = st.epoch_seconds + epoch_timer.seconds();
    st.train_seconds += epoch_seconds;
    st.total_samples += st.epoch_samples;
    st.epochs_run = st.epoch;
    Json record{{"step", st.global_step}, {"epoch", st.epoch}, {"train_logloss", st.epoch_loss_sum / double(std::max<std::int64_t>(1, st.epoch_samples))}};
    if (!data.has_valid) {
      save_best();
    } else {
      const Evaluation v = trainer.evaluate(data.valid);
      // The last step's update can diverge after its own (finite) loss was taken.
      SKEW_CHECK(std::isfinite(v.logloss) && !std::isnan(v.auc), "epoch " << st.epoch << ": the validation logloss is "
                     << v.logloss << " and AUC " << v.auc << ": the model diverged (try a smaller train.lr)");
      record["valid_logloss"] = v.logloss;
      record["valid_auc"] = v.auc;
      record["elapsed_s"] = total.seconds();  // since start, data loading included: time-to-AUC
      record["train_s"] = st.train_seconds;   // the epochs' training steps only: schema comparisons
      SKEW_INFO("epoch " << st.epoch << " train logloss " << record["train_logloss"].get<double>() << " valid logloss "
                         << v.logloss << " auc " << v.auc << " (" << epoch_seconds << " s)");
      if (v.logloss < st.best_loss) {
        st.best_loss = v.logloss;
        st.best_auc = v.auc;
        save_best();
        st.since_best = 0;
      } else if (patience > 0) {
        ++st.since_best;
      }
    }
    metrics.write(record);
    if (stopped_early())
      SKEW_INFO("early stop: no better validation logloss for " << patience << " epoch(s); keeping epoch " << st.best_epoch);
    // The next epoch starts afresh: checkpointed here, a resume begins it from its first step.
    ++st.epoch;
    st.step_in_epoch = st.epoch_samples = st.window_steps = 0;
    st.epoch_loss_sum = st.window_loss = st.epoch_seconds = 0;
    checkpoint.save(trainer, st);
  }
  Json summary{{"app", "wide_train"}, {"model", c.get_string("model.type")}, {"schema", c.get_string("train.schema")},
               {"device", c.get_string("train.device")}, {"ranks", ranks}, {"threads", threads}, {"features", shape.num_features},
               {"normalize", data.normalize},
               {"epochs_run", st.epochs_run}, {"best_epoch", st.best_epoch},
               {"valid_logloss", data.has_valid ? st.best_loss : 0.0}, {"valid_auc", st.best_auc},
               {"train_samples_per_s", double(st.total_samples) / std::max(1e-9, st.train_seconds)},
               {"train_nonzeros_per_s", double(st.total_nonzeros) / std::max(1e-9, st.train_seconds)},
               {"train_rows_skipped", data.report.skipped_lines}, {"data_seconds", data.report.seconds},
               {"seconds", total.seconds()}, {"model_path", model_path}, {"resumed", resumed}};
  metrics.close();  // checked: a failed last write is an error, not a stderr line
  if (rank == 0 && !dir.empty()) write_file_atomic(dir + "/summary.json", summary.dump() + "\n");
  return summary;
}

void predict(const Config& c, const comm::ProcessGroup& world) {
  SKEW_CHECK(world.size() == 1, "--predict runs on one rank");
  const std::string model_path = c.get_string("predict.model"), data_path = c.get_string("predict.data");
  SKEW_CHECK(!model_path.empty() && !data_path.empty(), "--predict needs predict.model and predict.data");
  WideModel model = WideModel::load(model_path);
  // The data is hashed as the model's training data was; a different data.hash_bits is a mistake.
  ReadOptions ro = read_options(c, world, c.get_int_as<int>("train.threads"));
  SKEW_CHECK(ro.hash_bits == 0 || ro.hash_bits == model.hash_bits,
             "data.hash_bits = " << ro.hash_bits << " but " << model_path << " was trained with data.hash_bits = "
                                 << model.hash_bits << " (--predict hashes as the model records; leave data.hash_bits at 0)");
  ro.hash_bits = model.hash_bits;
  SparseDataset data = load_dataset(data_path, ro);
  if (model.normalized) normalize_instances(data);  // as the model's training data was
  for (auto i : data.index)
    SKEW_CHECK(i < model.shape.num_features, data_path << ": feature " << i << " is beyond the model's " << model.shape.num_features);
  TrainOptions o;
  o.schema = TrainSchema::Classical;
  WideTrainer t(std::move(model), o);
  const std::vector<float> p = t.predict(data);
  std::string text;
  for (float v : p) text += std::to_string(v) + "\n";
  const std::string out = c.get_string("predict.output");
  if (out == "-") write_stdout(text, "the predictions");
  else write_file_atomic(out, text);
}

}  // namespace skew::wide
