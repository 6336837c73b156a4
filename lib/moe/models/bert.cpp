#include "lib/moe/models/bert.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace skew::moe {

ModelOptions BertModel::options(const MoeTrainOptions& options, MoeOptions moe) {
  ModelOptions m = GptModel::options(options, moe);
  m.vocab = kBertVocab;
  m.causal = false;
  return m;
}

MaskRule BertModel::mask_rule(const BertOptions& bert) {
  MaskRule r;
  r.chosen = bert.mask_prob;
  r.mask_token = bert.mask_token_prob;
  r.random_token = bert.random_token_prob;
  SKEW_CHECK(r.mask_token + r.random_token <= 1.0,
             "bert.mask_token_prob " << r.mask_token << " + bert.random_token_prob " << r.random_token
                                     << " exceeds 1 (they share out the chosen tokens; the rest stay as they were): "
                                        "lower one so that the two sum to at most 1");
  return r;
}

BertModel::BertModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
                     const std::vector<placement::LayerPlacement>& placements,
                     std::shared_ptr<BalancingPolicy<float>> policy)
    : GptModel(run, options, world, placements, std::move(policy)), rule_(mask_rule(run.bert)) {}

double BertModel::train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) {
  const int S = net_.options().seq_len;
  const std::int64_t first = static_cast<std::int64_t>(world_.rank()) * batch_;
  train_.sample(seed_, iteration, first, batch_, tokens_, targets_);  // the next-byte targets are unused
  for (int b = 0; b < batch_; ++b)
    mask_sequence(rule_, seed_, iteration, first + b, S, tokens_.data() + static_cast<std::size_t>(b) * S,
                  targets_.data() + static_cast<std::size_t>(b) * S);
  StepInputs in;
  in.training = true, in.iteration = iteration, in.seed = seed_, in.forced = forced;
  return net_.step(tokens_.data(), targets_.data(), batch_, in, true);
}

double BertModel::validation_loss() {
  const int S = net_.options().seq_len;
  const std::int64_t per_rank = eval_sequences_ / world_.size();
  // Chunks hold different numbers of chosen positions: sum the losses and hits, then divide.
  double loss_sum = 0, correct = 0, targeted = 0;
  for (std::int64_t first = 0; first < per_rank; first += batch_) {
    const int count = static_cast<int>(std::min<std::int64_t>(batch_, per_rank - first));
    std::vector<std::int32_t> tokens, targets;
    for (int i = 0; i < count; ++i) {
      const std::int64_t window = world_.rank() * per_rank + first + i;
      valid_.window(window, per_rank * world_.size(), tokens, targets);
      mask_sequence(rule_, seed_, kValidationDraw, window, S, tokens.data() + static_cast<std::size_t>(i) * S,
                    targets.data() + static_cast<std::size_t>(i) * S);
    }
    StepInputs in;
    in.training = false;
    net_.step(tokens.data(), targets.data(), count, in, false);
    loss_sum += net_.last_ce() * net_.last_targeted();
    correct += net_.last_correct(), targeted += net_.last_targeted();
  }
  val_accuracy_ = targeted > 0 ? correct / targeted : 0;
  return targeted > 0 ? loss_sum / targeted : 0;
}

Json BertModel::step_metrics() const {
  const double targeted = net_.last_targeted();
  return {{"masked_loss", net_.last_ce()},
          {"masked_accuracy", targeted > 0 ? net_.last_correct() / targeted : 0.0},
          {"masked_tokens", targeted}};
}

void BertModel::summarise(Json& summary) const {
  GptModel::summarise(summary);
  summary["mask_rule"] = {
      {"chosen", rule_.chosen}, {"mask_token", rule_.mask_token}, {"random_token", rule_.random_token}};
}

}  // namespace skew::moe
