#include "lib/moe/models/model.hpp"

#include "core/error.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

ModelOptions shared_model_options(const Config& c, MoeOptions moe) {
  ModelOptions m;
  m.d_model = c.get_int_as<int>("model.d_model");
  m.heads = c.get_int_as<int>("model.heads");
  m.d_ff = c.get_int_as<int>("model.d_ff");
  m.moe_every = c.get_int_as<int>("model.moe_every");
  SKEW_CHECK(m.d_model % m.heads == 0,
             "model.d_model " << m.d_model << " is not a multiple of model.heads " << m.heads);
  m.init_std = c.get_float("model.init_std");
  m.jitter = c.get_float("moe.jitter");
  m.precision = parse_precision(c.get_string("train.precision"));
  m.moe = moe;
  return m;
}

}  // namespace skew::moe
