// moe_train's options as plain values: one struct per config section, one field per key
// (section.field), filled once by apps/moe_train_options.cpp, which declares the keys, their
// defaults, ranges and help. Choice keys hold the chosen name.
#pragma once
#include <cstdint>
#include <string>

#include "lib/placement/options.hpp"

namespace skew::moe {

struct DataOptions {
  std::string train, valid;  // empty = the built-in corpus; its last 10%
  std::int64_t builtin_bytes = 200000;
  std::string mnist_dir;  // swin; empty = generated images
  int generated_images = 4000;
};

struct ModelSection {
  int d_model = 64, heads = 4, layers = 2, seq_len = 64, d_ff = 128, moe_every = 1;
  double init_std = 0.1;
  std::string arch = "gpt";  // gpt, bert or swin
};

struct BertOptions {
  double mask_prob = 0.15, mask_token_prob = 0.8, random_token_prob = 0.1;
};

struct SwinOptions {
  int patch = 2, window = 7, stage1_blocks = 2, stage2_blocks = 2;
};

struct MoeSection {
  int num_experts = 4, top_k = 1, d_ff = 128;
  double aux_weight = 0.01, z_weight = 0.001, jitter = 0;
  std::string policy = "static";  // static, deepspeed, fastermoe or flexmoe
  int fastermoe_chunks = 1;
  double capacity_factor = 1, eval_capacity_factor = 1;
  std::int64_t min_capacity = 4;
  bool drop_tokens = true, use_rts = true;
  std::string drop_policy = "position";  // position or probability
  std::string save_trace, replay_trace;
};

struct TrainSection {
  int batch_size = 8;
  std::int64_t iterations = 100;
  double lr = 1e-2, min_lr_ratio = 0.1;
  std::int64_t warmup = 10;
  double weight_decay = 0.01, beta1 = 0.9, beta2 = 0.95, grad_clip = 1;
  std::uint64_t seed = 1;
  std::int64_t eval_interval = 25, eval_sequences = 32, log_interval = 10;
  int blas_threads = 1;
  std::string device = "auto";     // auto, cpu or cuda
  std::string precision = "fp32";  // fp32 or bf16
};

struct OutputOptions {
  std::string metrics, checkpoint_dir;
  std::int64_t checkpoint_interval = 0;
  int keep = 2;
  bool resume = false;
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
