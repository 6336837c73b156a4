// wide_train's options, one struct per section of its keys (data.*, model.*, train.*, output.*,
// predict.*), each field named as its key. apps/wide_train_options.cpp declares the keys (their
// defaults, ranges and help) and fills these from the parsed configuration once; lib/wide reads
// only the structs.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/wide_model.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/optimizer.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide {

// Model rows are 32-bit in the kernels, and a model this wide is already 2^28 rows: beyond it
// the data should be hashed into fewer rows (data.hash_bits <= kMaxHashBits = 28).
constexpr std::int64_t kMaxModelFeatures = std::int64_t(1) << kMaxHashBits;
// data.max_memory_mb's ceiling, 16 TiB: past any machine's memory, and MiB << 20 stays far
// inside int64.
constexpr std::int64_t kMaxMemoryMb = std::int64_t(1) << 24;

// data.valid's value that asks for a held-out split of data.train (lib/wide/holdout.hpp), its
// default; data.valid_fraction's ceiling: at most half the rows go to validation.
inline constexpr const char* kValidAuto = "auto";
constexpr double kMaxValidFraction = 0.5;

struct DataOptions {
  std::string train;               // a libsvm/libffm file or a synthetic: spec
  std::string valid = kValidAuto;  // the same forms; auto = a held-out split of train; empty = none
  double valid_fraction = 0.1;     // valid = auto: the share of train's rows held out (0 = none)
  std::string format = "auto";
  bool skip_bad_lines = false;
  bool cache = true;               // read/write FILE.skewbin beside a text file
  bool load_overlap = true;        // a cached data.train may load while the first epoch trains
  std::int64_t max_memory_mb = 0;  // 0 = load data.train whole; else stream it within this cap
  int hash_bits = 0;
  std::int64_t max_line_bytes = kDefaultMaxLineBytes;  // a longer line is refused with file:line
};

struct ModelOptions {
  kernels::WideKind type = kernels::WideKind::FM;
  int k = 8;
  std::int64_t features = 0;  // 0 = max index + 1 in the data
  double init_std = 0.01;
  std::uint64_t seed = 1;
};

// train.normalize: auto is on for FM/FFM, off for LR.
enum class Normalize { Auto, On, Off };

// The train.* keys. The trainer itself takes the per-step subset, TrainOptions (trainer.hpp),
// which trainer_options() (lib/wide/trainer_options.hpp) builds from these.
struct TrainingOptions {
  Normalize normalize = Normalize::Auto;
  TrainSchema schema = TrainSchema::Flow;
  ClassicalSync classical_sync = ClassicalSync::Hogwild;
  TrainDevice device = TrainDevice::Cpu;
  bool overlap = true;
  OptimizerKind optimizer = OptimizerKind::AdaGrad;
  double lr = 0;  // 0 = the model's default
  double l2 = 1e-5, l1 = 0, ftrl_beta = 1;
  double adagrad_init = 0;                  // AdaGrad's start per sample; 0 = the model's default (trainer_options.hpp)
  std::int64_t epochs = 5, batch_size = 0;  // 0 = the model's default (trainer_options.hpp)
  int threads = 1;
  bool profile = false;
  int patience = 2;
  bool renumber = true;
  int tile_samples = 0;  // 0 = the model's default
  std::int64_t hot_features = 4096, replica_budget_mb = 16;
  std::int64_t log_every = 20;
};

struct OutputOptions {
  std::string dir, model, checkpoint_dir;
  std::int64_t checkpoint_interval = 0;
  int keep = 2;
  bool resume = false;
};

struct PredictOptions {
  std::string model, data, output = "-";
};

struct WideOptions {
  DataOptions data;
  ModelOptions model;
  TrainingOptions train;
  OutputOptions output;
  PredictOptions predict;
};

}  // namespace skew::wide
