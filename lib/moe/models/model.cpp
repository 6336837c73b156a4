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
  if (m.d_model % m.heads != 0) {
    int divisor = m.heads;  // the most heads up to model.heads that split d_model evenly
    while (m.d_model % divisor != 0) --divisor;
    SKEW_THROW("model.d_model " << m.d_model << " is not a multiple of model.heads " << m.heads
                                << " (each head takes d_model / heads columns): set model.d_model to a multiple of "
                                << m.heads << " (" << (m.d_model / m.heads + 1) * m.heads
                                << ", say) or model.heads to a divisor of " << m.d_model << " (" << divisor
                                << ", say)");
  }
  m.init_std = model.init_std;
  m.jitter = options.moe.jitter;
  m.precision = parse_precision(options.train.precision);
  m.moe = moe;
  return m;
}

}  // namespace skew::moe
