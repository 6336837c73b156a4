#include "lib/wide/trainer_options.hpp"

#include <algorithm>

namespace skew::wide {

// Instance-normalised FM/FFM inputs are about 1/sqrt(39) of the raw ones on Criteo-like rows,
// and their pairwise terms shrink with its square: they want larger steps than LR (on a
// synthetic development set: LR best at 0.05, FM at 0.1, FFM at 0.5; LR at 0.2 and FM at 0.2
// overfit after epoch 2-3).
float learning_rate(const WideOptions& o) {
  if (o.train.lr > 0) return float(o.train.lr);
  const kernels::WideKind kind = o.model.type;
  return kind == kernels::WideKind::LR ? 0.05f : kind == kernels::WideKind::FM ? 0.1f : 0.5f;
}

// FFM's default is xLearn's and LIBFFM's start, 1: with FFM's batch of 256 it halves FFM's test
// logloss gap to xLearn at equal epochs on the peers' development split (issue 36,
// docs/wide.md). LR and FM keep the rule from before the key.
double adagrad_init(const WideOptions& o) {
  if (o.train.adagrad_init > 0) return o.train.adagrad_init;
  return o.model.type == kernels::WideKind::FFM ? 1.0 : 0.0;
}

// FFM steps on batches of 256 (issue 36): with AdaGrad from 1 per sample its test logloss at 5
// epochs on the development split is .3573 (batch 32 .3559, 128 .3567, 1024 .3588; xLearn
// .3559), at the old batch's speed on one thread where batch 32 costs a fifth, and at two
// threads 0.8x the old speed where batch 32 costs half (quiet machine, docs/wide.md).
// LR and FM keep 1024 and 256, and so does FFM on a GPU (train.device = cuda), whose kernels
// want thousands of samples a launch (not measured with FFM's small batches: no GPU here).
std::int64_t batch_size(const WideOptions& o) {
  if (o.train.batch_size > 0) return o.train.batch_size;
  return o.model.type == kernels::WideKind::FFM && o.train.device == TrainDevice::Cpu ? 256 : 1024;
}

int tile_samples(const WideOptions& o) {
  if (o.train.tile_samples > 0) return o.train.tile_samples;
  if (o.model.type != kernels::WideKind::FFM || o.train.device != TrainDevice::Cpu) return 256;
  return int(std::clamp<std::int64_t>(batch_size(o) / 2, 1, 256));
}

TrainOptions trainer_options(const WideOptions& w, int ranks) {
  const TrainingOptions& t = w.train;
  TrainOptions o;
  o.schema = t.schema;
  o.classical_sync = t.classical_sync;
  o.device = t.device;
  o.overlap = t.overlap;
  o.threads = t.threads;
  o.profile = t.profile;
  o.optimizer.kind = t.optimizer;
  o.optimizer.lr = learning_rate(w);
  o.optimizer.l2 = float(t.l2);
  o.optimizer.l1 = float(t.l1);
  o.optimizer.beta = float(t.ftrl_beta);
  o.flow.tile_samples = tile_samples(w);
  o.flow.hot_features = t.hot_features;
  o.flow.replica_budget_bytes = t.replica_budget_mb << 20;
  const double init = adagrad_init(w);
  if (init > 0) o.optimizer.eps = adagrad_eps(init, runs_hogwild(o, ranks) ? 1 : batch_size(w));
  return o;
}

}  // namespace skew::wide
