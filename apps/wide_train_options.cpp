#include "apps/wide_train_options.hpp"

#include "apps/run_dir.hpp"
#include "core/thread_limits.hpp"

namespace skew::wide {

namespace {

void add_data_keys(Schema& s) {
  s.add_string("data.train", "synthetic:criteo?rows=20000&features=50000&alpha=1.1&seed=1",
               "training data: a libsvm/libffm file or synthetic:criteo?rows=N&features=F&alpha=A&seed=S");
  s.add_string("data.valid", kValidAuto,
               "validation data (same forms); auto = a held-out split of data.train (data.valid_fraction of its rows, "
               "drawn by model.seed; none when data.train streams); empty = no validation");
  s.add_float("data.valid_fraction", 0.1, FloatRange{0, kMaxValidFraction},
              "data.valid = auto: the share of data.train's rows held out for validation, each row by a hash of "
              "(model.seed, its row number), so the same rows on any number of ranks (0 = no validation)");
  s.add_choice("data.format", "auto", {"auto", "libsvm", "libffm"}, "text format (auto: .libffm/.ffm -> libffm)");
  s.add_bool("data.skip_bad_lines", false, "skip (and count) malformed lines instead of failing");
  s.add_int("data.max_line_bytes", kDefaultMaxLineBytes, {64, std::int64_t(1) << 40},
            "a data.train/data.valid line longer than this many bytes is malformed (refused with file:line, or "
            "skipped with data.skip_bad_lines) before it is parsed: a binary file or a missing newline cannot make "
            "the reader hold gigabytes");
  s.add_bool(
      "data.cache", true,
      "read/write a binary cache FILE.skewbin beside a text file (a streamed data.train's first pass writes it, "
      "its epochs read it); keyed on the file's size, mtime, ctime and inode; a pipe (a FIFO, <(zcat f.gz)) needs "
      "false, and is then read once, whole");
  s.add_bool("data.load_overlap", true,
             "a data.train read whole from its binary cache loads on a thread of its own while the first epoch trains "
             "on the rows already in (one rank, train.device = cpu, train.renumber on, and a CPU of the process's "
             "beyond train.threads; else it loads first); a cache that fails its checksum once rows of it were "
             "trained on is re-parsed and the run starts over, as a load that checks it first would");
  s.add_int("data.max_memory_mb", 0, {0, kMaxMemoryMb},
            "0 = load data.train whole; M > 0 = a cap on the process's resident memory: a libsvm/libffm data.train "
            "streams (a reader thread fills a ring of 3 buffers with chunks of rows, read from the file's binary cache "
            "when data.cache is on -- the first pass parses the text and writes the cache, in bounded memory, when "
            "none matches the file or its checksum fails -- else parsed from the text every epoch), and the ring gets "
            "what M leaves after the process's resident memory measured before the model (libraries, MPI, "
            "data.valid), the model, its gradient, the optimizer state, the step's buffers and the best epoch's copy; "
            "a run M cannot hold is refused with the numbers. Same rows, order and model as the whole load: each rank "
            "streams the whole load's share of the rows, rank 0 alone making the first pass (and writing the cache); "
            "epoch-end checkpoints only; the summary's peak_rss_bytes is rank 0's peak (VmHWM). Either way the model's "
            "parameters and optimizer state (and a data file loaded whole) are compared with M and MemAvailable "
            "before any data is read");
  s.add_int("data.hash_bits", 0, {0, kMaxHashBits},
            "feature hashing: 0 = each (64-bit) feature id is its model row (ids up to 2^28 - 1); b > 0 = id maps to "
            "row fmix64(id ^ 0x9e3779b97f4a7c15) >> (64 - b) of a 2^b-row model (MurmurHash3's finaliser; the same "
            "row in every run and rank; the saved model records b for --predict)");
}

void add_model_keys(Schema& s) {
  s.add_choice("model.type", "fm", {"lr", "fm", "ffm"}, "model: logistic regression, FM or field-aware FM");
  s.add_int("model.k", 8, {1, 1024}, "latent dimension (FM/FFM)");
  s.add_int("model.features", 0, {0, kMaxModelFeatures}, "number of features; 0 = max index + 1 in the data");
  s.add_float("model.init_std", 0.01, FloatRange::at_least(0), "std of the initial latent factors");
  s.add_int("model.seed", 1, IntRange::at_least(0), "initialisation seed");
}

void add_train_keys(Schema& s) {
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
  s.add_bool("train.overlap", true,
             "cuda: copy the next mini-batch to the GPU on a second stream while this one computes");
  s.add_choice("train.optimizer", "adagrad", {"sgd", "adagrad", "ftrl"}, "optimizer");
  s.add_float("train.lr", 0.0, FloatRange::at_least(0),
              "learning rate (FTRL: alpha); 0 = the model's default: 0.05 for LR, 0.1 for FM, 0.5 for FFM (AdaGrad, "
              "with train.normalize = auto; the best test logloss of a synthetic sweep)");
  s.add_float("train.l2", 1e-5, FloatRange::at_least(0), "L2 regularisation");
  s.add_float(
      "train.adagrad_init", 0.0, FloatRange{0, 1e6},
      "AdaGrad's initial accumulator, on the scale of one sample's squared gradient (xLearn and LIBFFM start at "
      "1): a step on a batch of B samples' averaged gradient starts at train.adagrad_init / B^2, the same step "
      "as per-sample AdaGrad's on the batch's summed gradient (Hogwild: per sample); 0 = the model's default: "
      "FFM 1; LR and FM 1e-6 on the step's gradient, whatever its batch (1.05 per sample at batch 1024)");
  s.add_float("train.l1", 0.0, FloatRange::at_least(0), "L1 (FTRL only)");
  s.add_float("train.ftrl_beta", 1.0, FloatRange::at_least(0), "FTRL beta");
  s.add_int("train.epochs", 5, {1, kMaxInt32}, "maximum number of epochs");
  s.add_int("train.batch_size", 0, IntRange::at_least(0),
            "global mini-batch size (split evenly over ranks); 0 = the model's default: 256 for FFM on the CPU (with "
            "AdaGrad from 1 per sample, near xLearn's test logloss at equal epochs; smaller batches come nearer at a "
            "speed cost: docs/wide.md), 1024 for LR, FM and FFM on cuda");
  s.add_int("train.threads", 1, {1, 1024},
            "worker threads per rank (at most 8 per CPU of the machine: more is refused)");
  s.add_bool("train.profile", false,
             "time the CPU training steps' thread-pool passes: the summary's step_profile gives, per step, each "
             "pass's wall time and each thread's CPU time in it (the wall over the busiest thread's CPU is what "
             "the threads waited), and the time outside the passes");
  s.add_int("train.patience", 2, {0, kMaxInt32},
            "stop after this many epochs without a better validation logloss (0 = never)");
  s.add_choice("train.sync", "allreduce", {"allreduce"}, "multi-rank synchronisation of the gradient");
  s.add_bool("train.renumber", true,
             "renumber features by frequency (flow: hot features get small ids); a loaded data.train's binary "
             "cache holds the order (no counting at start-up), else the features are counted over the ranks");
  s.add_int("train.tile_samples", 0, {0, 1 << 20},
            "flow: samples per tile; 0 = the model's default: FFM on the CPU half the batch up to 256 (a batch's tiles "
            "are dealt to the threads: two at FFM's batch of 256), else 256");
  s.add_int("train.hot_features", 4096, {0, 1 << 30},
            "flow: number of hottest features with cached, replicated accumulators");
  s.add_int("train.replica_budget_mb", 16, {0, 1 << 20},  // 1 TiB: MiB << 20 stays far inside int64
            "flow, LR on the CPU: if threads x features x 4 B fit in this many MiB, every feature is hot in a batch "
            "with at least features / 8 entries (0 = never)");
  s.add_int("train.log_every", 20, IntRange::at_least(1), "progress line and metrics record every N steps");
}

void add_output_keys(Schema& s) {
  add_run_dir_key(s, "config.ini, metrics.jsonl, summary.json and model.safetensors");
  s.add_string("output.model", "",
               "where the best epoch's model is saved: once, when training ends (stops early, or fails); with "
               "output.checkpoint_dir at each epoch that improves it (default OUTPUT_DIR/model.safetensors)");
  // The names and meanings of moe_train's checkpoint keys (apps/moe_train_options.cpp).
  s.add_string("output.checkpoint_dir", "",
               "checkpoint directory (empty = none): model, optimizer state and the run's position, at every epoch end "
               "(CPU only; bit-exact resume at train.threads = 1)");
  s.add_int("output.checkpoint_interval", 0, IntRange::at_least(0),
            "steps between mid-epoch checkpoints (0 = only at the epoch ends)");
  s.add_int("output.keep", 2, {1, kMaxInt32}, "checkpoints kept");
  s.add_bool("output.resume", false, "resume from the newest complete checkpoint in output.checkpoint_dir");
}

void add_predict_keys(Schema& s) {
  s.add_string("predict.model", "", "--predict: the model to load");
  s.add_string("predict.data", "", "--predict: the data to score");
  s.add_string("predict.output", "-", "--predict: output file, one probability per line ('-' = stdout)");
}

Normalize normalize_from_name(const std::string& name) {
  return name == "auto" ? Normalize::Auto : name == "on" ? Normalize::On : Normalize::Off;
}

DataOptions data_options(const Config& c) {
  DataOptions o;
  o.train = c.get_string("data.train");
  o.valid = c.get_string("data.valid");
  o.valid_fraction = c.get_float("data.valid_fraction");
  o.format = c.get_string("data.format");
  o.skip_bad_lines = c.get_bool("data.skip_bad_lines");
  o.cache = c.get_bool("data.cache");
  o.load_overlap = c.get_bool("data.load_overlap");
  o.max_memory_mb = c.get_int("data.max_memory_mb");
  o.hash_bits = c.get_int_as<int>("data.hash_bits");
  o.max_line_bytes = c.get_int("data.max_line_bytes");
  return o;
}

ModelOptions model_options(const Config& c) {
  ModelOptions o;
  o.type = kernels::wide_kind_from_name(c.get_string("model.type"));
  o.k = c.get_int_as<int>("model.k");
  o.features = c.get_int("model.features");
  o.init_std = c.get_float("model.init_std");
  o.seed = c.get_int_as<std::uint64_t>("model.seed");
  return o;
}

TrainingOptions training_options(const Config& c) {
  TrainingOptions o;
  o.normalize = normalize_from_name(c.get_string("train.normalize"));
  o.schema = schema_from_name(c.get_string("train.schema"));
  o.classical_sync = classical_sync_from_name(c.get_string("train.classical_sync"));
  o.device = device_from_name(c.get_string("train.device"));
  o.overlap = c.get_bool("train.overlap");
  o.optimizer = optimizer_from_name(c.get_string("train.optimizer"));
  o.lr = c.get_float("train.lr");
  o.l2 = c.get_float("train.l2");
  o.adagrad_init = c.get_float("train.adagrad_init");
  o.l1 = c.get_float("train.l1");
  o.ftrl_beta = c.get_float("train.ftrl_beta");
  o.epochs = c.get_int("train.epochs");
  o.batch_size = c.get_int("train.batch_size");
  o.threads = c.get_int_as<int>("train.threads");
  require_thread_count("train.threads", o.threads);
  o.profile = c.get_bool("train.profile");
  o.patience = c.get_int_as<int>("train.patience");
  o.renumber = c.get_bool("train.renumber");
  o.tile_samples = c.get_int_as<int>("train.tile_samples");
  o.hot_features = c.get_int("train.hot_features");
  o.replica_budget_mb = c.get_int("train.replica_budget_mb");
  o.log_every = c.get_int("train.log_every");
  // train.sync has a single value (allreduce): nothing to carry.
  return o;
}

OutputOptions output_options(const Config& c, const std::string& run_dir) {
  OutputOptions o;
  o.dir = run_dir;
  o.model = in_run_dir(c.get_string("output.model"), run_dir);
  o.checkpoint_dir = in_run_dir(c.get_string("output.checkpoint_dir"), run_dir);
  o.checkpoint_interval = c.get_int("output.checkpoint_interval");
  o.keep = c.get_int_as<int>("output.keep");
  o.resume = c.get_bool("output.resume");
  return o;
}

PredictOptions predict_options(const Config& c) {
  PredictOptions o;
  o.model = c.get_string("predict.model");
  o.data = c.get_string("predict.data");
  o.output = c.get_string("predict.output");
  return o;
}

}  // namespace

Schema wide_train_schema() {
  Schema s("wide_train",
           "Train LR/FM/FFM on sparse data with the classical or flow (cuWide) schema; with --predict, score "
           "predict.data with the model in predict.model instead.");
  add_data_keys(s);
  add_model_keys(s);
  add_train_keys(s);
  add_output_keys(s);
  add_predict_keys(s);
  return s;
}

WideOptions wide_train_options(const Config& config, const std::string& run_dir) {
  return {data_options(config), model_options(config), training_options(config), output_options(config, run_dir),
          predict_options(config)};
}

}  // namespace skew::wide
