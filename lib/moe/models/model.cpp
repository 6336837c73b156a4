#include "lib/moe/models/model.hpp"

#include "core/error.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

ModelOptions shared_model_options(const MoeTrainOptions& options, MoeOptions moe) {
  const ModelSection& model = options.model;
  ModelOptions m;
  m.d_model = model.d_model;
  m.heads = model.heads;
  m.d_ff = model.d_ff;
  m.moe_every = model.moe_every;
  SKEW_CHECK(m.d_model % m.heads == 0,
             "model.d_model " << m.d_model << " is not a multiple of model.heads " << m.heads);
  m.init_std = model.init_std;
  m.jitter = options.moe.jitter;
  m.precision = parse_precision(options.train.precision);
  m.moe = moe;
  return m;
}

}  // namespace skew::moe
