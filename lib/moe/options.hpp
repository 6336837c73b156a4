// moe_train's options as plain values: one struct per config section, one field per key
// (section.field), filled once by apps/moe_train_options.cpp, which declares the keys, their
// defaults, ranges and help (the defaults live there alone). Choice keys hold the chosen name.
#pragma once
#include <cstdint>
#include <string>

#include "lib/placement/options.hpp"

namespace skew::moe {

struct DataOptions {
  std::string train, valid;  // empty = the built-in corpus; its last 10%
  std::int64_t builtin_bytes{};
  std::int64_t max_memory_mb{};  // 0 = MemAvailable alone: the bound on the text held
  std::string mnist_dir;         // swin; empty = generated images
  int generated_images{};
};

struct ModelSection {
  int d_model{}, heads{}, layers{}, seq_len{}, d_ff{}, moe_every{};
  double init_std{};
  std::string arch;  // gpt, bert or swin
};

struct BertOptions {
  double mask_prob{}, mask_token_prob{}, random_token_prob{};
};

struct SwinOptions {
  int patch{}, window{}, stage1_blocks{}, stage2_blocks{};
};

struct MoeSection {
  int num_experts{}, top_k{}, d_ff{};
  double aux_weight{}, z_weight{}, jitter{};
  std::string policy;  // static, deepspeed, fastermoe or flexmoe
  int fastermoe_chunks{};
  double capacity_factor{}, eval_capacity_factor{};
  std::int64_t min_capacity{};
  bool drop_tokens{}, use_rts{};
  std::string drop_policy;  // position or probability
  std::string save_trace, replay_trace;
};

struct TrainSection {
  int batch_size{};
  std::int64_t iterations{};
  double lr{}, min_lr_ratio{};
  std::int64_t warmup{};
  double weight_decay{}, beta1{}, beta2{}, grad_clip{};
  std::uint64_t seed{};
  std::int64_t eval_interval{}, eval_sequences{}, log_interval{};
  int blas_threads{};
  std::string device;     // auto, cpu or cuda
  std::string precision;  // fp32 or bf16
};

struct OutputOptions {
  std::string metrics, checkpoint_dir;
  std::int64_t checkpoint_interval{};
  int keep{};
  bool resume{};
};

struct MoeTrainOptions {
  DataOptions data;
  ModelSection model;
  BertOptions bert;
  SwinOptions swin;
  MoeSection moe;
  TrainSection train;
  OutputOptions output;
  placement::PlacementSettings placement;
};

}  // namespace skew::moe
