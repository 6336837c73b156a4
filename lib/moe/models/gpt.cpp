#include "lib/moe/models/gpt.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace skew::moe {

ModelOptions GptModel::options(const MoeTrainOptions& options, MoeOptions moe) {
  ModelOptions m = shared_model_options(options, moe);
  m.layers = options.model.layers;
  m.seq_len = options.model.seq_len;
  m.moe.d_model = m.d_model;  // the experts' width is the model's (GptMoe sets it too)
  return m;
}

GptModel::Texts GptModel::read_texts(const DataOptions& data) {
  Texts t;
  const std::string &train_file = data.train, &valid_file = data.valid;
  t.train_source = train_file.empty() ? "the built-in corpus (data.builtin_bytes)" : "data.train " + train_file;
  t.train = train_file.empty() ? builtin_corpus(static_cast<std::size_t>(data.builtin_bytes), 12345)
                               : read_text(train_file, data.max_memory_mb);
  if (!valid_file.empty()) {
    t.valid = read_text(valid_file, data.max_memory_mb);
    t.valid_source = "data.valid " + valid_file;
  } else {
    const std::size_t cut = t.train.size() - t.train.size() / 10;
    t.valid = t.train.substr(cut);
    t.train.resize(cut);
    t.valid_source = "the last 10% of " + t.train_source + ", the validation text";
  }
  return t;
}

GptModel::GptModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
                   const std::vector<placement::LayerPlacement>& placements,
                   std::shared_ptr<BalancingPolicy<float>> policy)
    : GptModel(run.train, options, world, placements, std::move(policy), read_texts(run.data)) {}

GptModel::GptModel(const TrainSection& train, const ModelOptions& options, comm::ProcessGroup& world,
                   const std::vector<placement::LayerPlacement>& placements,
                   std::shared_ptr<BalancingPolicy<float>> policy, const Texts& texts)
    : world_(world),
      train_(texts.train, options.seq_len, texts.train_source),
      valid_(texts.valid, options.seq_len, texts.valid_source),
      entropy_(unigram_entropy(texts.valid)),
      batch_(train.batch_size),
      seed_(train.seed),
      eval_sequences_(train.eval_sequences),
      net_(options, world, placements, std::move(policy)) {
  SKEW_CHECK(eval_sequences_ >= world.size(), "train.eval_sequences " << eval_sequences_ << " is fewer than the "
                                                                      << world.size()
                                                                      << " ranks: each evaluates at least one window");
  net_.init(seed_);
}

std::int64_t GptModel::tokens_per_step() const {
  return static_cast<std::int64_t>(batch_) * net_.options().seq_len;
}

double GptModel::train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) {
  train_.sample(seed_, iteration, static_cast<std::int64_t>(world_.rank()) * batch_, batch_, tokens_, targets_);
  StepInputs in;
  in.training = true, in.iteration = iteration, in.seed = seed_, in.forced = forced;
  return net_.step(tokens_.data(), targets_.data(), batch_, in, true);
}

double GptModel::validation_loss() {
  const std::int64_t per_rank = eval_sequences_ / world_.size();
  double sum = 0;
  int chunks = 0;
  for (std::int64_t first = 0; first < per_rank; first += batch_, ++chunks) {
    const int count = static_cast<int>(std::min<std::int64_t>(batch_, per_rank - first));
    std::vector<std::int32_t> tokens, targets;
    for (int i = 0; i < count; ++i)
      valid_.window(world_.rank() * per_rank + first + i, per_rank * world_.size(), tokens, targets);
    StepInputs in;
    in.training = false;
    net_.step(tokens.data(), targets.data(), count, in, false);
    sum += net_.last_ce();
  }
  return sum / chunks;
}

}  // namespace skew::moe
