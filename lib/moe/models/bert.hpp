// The BERT family: the GPT family's network with bidirectional attention (model.causal off) and
// a mask token after the 256 bytes, trained with the masked-LM objective (bert_mask.hpp, bert.*
// keys) on the same corpora: mean cross-entropy of the chosen positions only, over all ranks.
// Reports masked-token loss and accuracy, in training and validation.
#pragma once
#include "lib/moe/models/bert_mask.hpp"
#include "lib/moe/models/gpt.hpp"

namespace skew::moe {

class BertModel : public GptModel {
 public:
  // GptModel::options with the 257-token vocabulary and bidirectional attention.
  static ModelOptions options(const MoeTrainOptions& options, MoeOptions moe);
  static MaskRule mask_rule(const BertOptions& bert);
  BertModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
            const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<float>> policy);

  double train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) override;
  // Masked-token cross-entropy over train.eval_sequences evenly spaced windows, each masked by
  // the fixed validation draw, so every evaluation scores the same positions.
  double validation_loss() override;
  // "masked_loss" (the objective) and "masked_accuracy": the share of chosen positions whose
  // most probable token is the original byte.
  Json step_metrics() const override;
  Json validation_metrics() const override { return {{"masked_accuracy", val_accuracy_}}; }
  // The unigram entropy of the validation text (a context-free guesser's masked-token loss,
  // up to the 10% of chosen positions that show their own byte) and the mask rule.
  void summarise(Json& summary) const override;

 private:
  MaskRule rule_;
  double val_accuracy_ = 0;
};

}  // namespace skew::moe
