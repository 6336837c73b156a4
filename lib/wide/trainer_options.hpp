// The trainer's per-step options (TrainOptions) from wide_train's train.* keys, with the
// model-dependent defaults the keys leave to the model (learning rate, AdaGrad's start).
#pragma once
#include "lib/wide/options.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide {

// train.lr, or for 0 the model's default.
float learning_rate(const WideOptions& o);
// train.adagrad_init, or for 0 the model's default; 0 again for the models that keep AdaGrad's
// start fixed on the step's gradient (eps = 1e-6 at any batch size).
double adagrad_init(const WideOptions& o);
// train.batch_size and train.tile_samples, or for 0 the model's defaults.
std::int64_t batch_size(const WideOptions& o);
int tile_samples(const WideOptions& o);
// For a run on `ranks` ranks (Hogwild steps per sample on one rank; the other schemas on the
// global batch's averaged gradient, which scales AdaGrad's start: adagrad_eps).
TrainOptions trainer_options(const WideOptions& w, int ranks);

}  // namespace skew::wide
