// A model family as moe_train's loop sees it: its network, its data and its objective: GPT
// (gpt.hpp), BERT (bert.hpp) and Swin (swin.hpp), chosen by model.arch. The trainer drives the
// step (zero gradients, the family's train_step, gradient sync, AdamW), evaluation, checkpoints
// and the balancing policy without knowing which family it trains.
#pragma once
#include <cstdint>
#include <vector>

#include "core/metrics.hpp"
#include "lib/moe/models/network.hpp"
#include "lib/moe/options.hpp"

namespace skew::moe {

// The network options every family reads alike (model.d_model, heads, d_ff, moe_every, init_std,
// moe.jitter, train.precision) with the MoE layers' options `moe`; each family then sets its own
// depth, sequence length and expert width.
ModelOptions shared_model_options(const MoeTrainOptions& options, MoeOptions moe);

class Model {
 public:
  virtual ~Model() = default;
  // The parameters and MoE layers, which the optimizer, checkpoints and policy act on.
  virtual MoeNetwork<float>& network() = 0;
  // Tokens this rank routes per MoE layer and iteration (top_k choices each).
  virtual std::int64_t tokens_per_step() const = 0;
  // Forward and backward of training iteration `iteration` on this rank's batch, accumulating
  // gradients; `forced`: per MoE layer, replayed expert choices (or none). Returns the loss.
  virtual double train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) = 0;
  // The objective alone of the last train_step (the loss without the gates' auxiliary losses).
  virtual double last_objective() const = 0;
  // The objective on held-out data (collective).
  virtual double validation_loss() = 0;
  // The family's own measures of the last train_step (e.g. BERT's masked-token accuracy), added
  // to the iteration's record and progress line and, as "final_<name>", to the summary; none by
  // default.
  virtual Json step_metrics() const { return Json::object(); }
  // The same of the last validation_loss() (e.g. Swin's "accuracy"), recorded with a "val_"
  // prefix: "val_<name>" in the record and progress line, "final_val_<name>" in the summary.
  virtual Json validation_metrics() const { return Json::object(); }
  // What the family adds to the run's summary (e.g. the loss of a context-free baseline).
  virtual void summarise(Json& summary) const = 0;
};

}  // namespace skew::moe
