// The GPT family: a GptMoe network (gpt_network.hpp) trained as a byte-level language model,
// next-byte cross-entropy on a text corpus (data.*, lib/moe/corpus.hpp), with model.* shaping
// the network.
#pragma once
#include <memory>
#include <string>

#include "lib/moe/corpus.hpp"
#include "lib/moe/models/gpt_network.hpp"
#include "lib/moe/models/model.hpp"

namespace skew::moe {

class GptModel : public Model {
 public:
  // The network's options from model.*, train.precision and moe.jitter, with the MoE layers'
  // options `moe`.
  static ModelOptions options(const MoeTrainOptions& options, MoeOptions moe);
  // Reads the corpus and builds and initialises the network (train.seed) with one placement per
  // MoE layer, all its layers consulting `policy`.
  GptModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
           const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<float>> policy);

  MoeNetwork<float>& network() override { return net_; }
  std::int64_t tokens_per_step() const override;
  double train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) override;
  double last_objective() const override { return net_.last_ce(); }
  // Mean cross-entropy over train.eval_sequences evenly spaced windows, split over the ranks.
  double validation_loss() override;
  // "unigram_entropy" of the validation text: the loss of the best model ignoring context.
  void summarise(Json& summary) const override { summary["unigram_entropy"] = entropy_; }

 protected:
  struct Texts {
    std::string train, valid;
    std::string train_source, valid_source;  // for errors: a file name or the built-in corpus
  };
  static Texts read_texts(const DataOptions& data);
  GptModel(const TrainSection& train, const ModelOptions& options, comm::ProcessGroup& world,
           const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<float>> policy,
           const Texts& texts);

  comm::ProcessGroup& world_;
  ByteCorpus train_, valid_;
  double entropy_;
  int batch_;  // sequences per rank per iteration
  std::uint64_t seed_;
  std::int64_t eval_sequences_;
  GptMoe<float> net_;
  std::vector<std::int32_t> tokens_, targets_;
};

}  // namespace skew::moe
