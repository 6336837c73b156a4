#include "lib/moe/models/swin.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace skew::moe {

ModelOptions SwinModel::options(const MoeTrainOptions& options, MoeOptions moe) {
  ModelOptions m = shared_model_options(options, moe);
  m.layers = options.swin.stage2_blocks;  // the blocks ModelOptions::moe_layers counts
  m.moe.d_model = 2 * m.d_model;          // stage 2's width (SwinMoe sets it too)
  return m;
}

ImageSplits SwinModel::read_images(const MoeTrainOptions& run) {
  const std::string& dir = run.data.mnist_dir;
  if (!dir.empty()) return load_mnist(dir);
  const int count = run.data.generated_images;
  const std::uint64_t seed = run.train.seed;
  return {generated_digits(count, seed, 1), generated_digits(std::max(count / 4, 1), seed, 2)};
}

namespace {
SwinShape shape_of(const SwinOptions& swin, const ImageSet& images) {
  SwinShape shape;
  shape.image = images.side, shape.channels = images.channels, shape.classes = images.classes;
  shape.patch = swin.patch;
  shape.window = swin.window;
  shape.stage1_blocks = swin.stage1_blocks;
  return shape;
}
}  // namespace

SwinModel::SwinModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
                     const std::vector<placement::LayerPlacement>& placements,
                     std::shared_ptr<BalancingPolicy<float>> policy)
    : SwinModel(run, options, world, placements, std::move(policy), read_images(run)) {}

SwinModel::SwinModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
                     const std::vector<placement::LayerPlacement>& placements,
                     std::shared_ptr<BalancingPolicy<float>> policy, ImageSplits data)
    : world_(world),
      data_(std::move(data)),
      batch_(run.train.batch_size),
      seed_(run.train.seed),
      eval_images_(std::min<std::int64_t>(run.train.eval_sequences, data_.held_out.count())),
      net_(options, shape_of(run.swin, data_.train), world, placements, std::move(policy)) {
  SKEW_CHECK(eval_images_ >= world.size(), "train.eval_sequences " << eval_images_ << " (held-out images of "
                                                                   << data_.held_out.source << ") is fewer than the "
                                                                   << world.size()
                                                                   << " ranks: each evaluates one at least");
  net_.init(seed_);
}

std::int64_t SwinModel::tokens_per_step() const {
  return static_cast<std::int64_t>(batch_) * net_.tokens_per_image();
}

double SwinModel::train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) {
  const ImageSet& train = data_.train;
  pixels_.resize(static_cast<std::size_t>(batch_) * train.image_size()),
      labels_.resize(static_cast<std::size_t>(batch_));
  for (int b = 0; b < batch_; ++b) {
    // Image b of this rank is a pure function of (seed, iteration, its global position).
    Rng rng(seed_, (1ULL << 41) + static_cast<std::uint64_t>(iteration),
            static_cast<std::uint64_t>(world_.rank() * batch_ + b) * 2);
    const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(train.count())));
    std::copy_n(train.image(i), train.image_size(), pixels_.data() + static_cast<std::size_t>(b) * train.image_size());
    labels_[static_cast<std::size_t>(b)] = train.labels[static_cast<std::size_t>(i)];
  }
  StepInputs in;
  in.training = true, in.iteration = iteration, in.seed = seed_, in.forced = forced;
  return net_.step(pixels_.data(), labels_.data(), batch_, in, true);
}

double SwinModel::validation_loss() {
  const ImageSet& held = data_.held_out;
  const std::int64_t per_rank = eval_images_ / world_.size(), total = per_rank * world_.size();
  double loss = 0;
  std::int64_t correct = 0;
  for (std::int64_t first = 0; first < per_rank; first += batch_) {
    const int count = static_cast<int>(std::min<std::int64_t>(batch_, per_rank - first));
    pixels_.resize(static_cast<std::size_t>(count) * held.image_size()),
        labels_.resize(static_cast<std::size_t>(count));
    for (int b = 0; b < count; ++b) {
      const std::int64_t i = (world_.rank() * per_rank + first + b) * held.count() / total;  // evenly spaced
      std::copy_n(held.image(static_cast<int>(i)), held.image_size(),
                  pixels_.data() + static_cast<std::size_t>(b) * held.image_size());
      labels_[static_cast<std::size_t>(b)] = held.labels[static_cast<std::size_t>(i)];
    }
    StepInputs in;
    in.training = false;
    net_.step(pixels_.data(), labels_.data(), count, in, false);
    // last_ce is the mean over this chunk's count * ranks images.
    loss += net_.last_ce() * count / static_cast<double>(per_rank);
    correct += net_.last_correct();
  }
  accuracy_ = static_cast<double>(correct) / static_cast<double>(total);
  return loss;
}

Json SwinModel::validation_metrics() const {
  return {{"accuracy", accuracy_}};
}

void SwinModel::summarise(Json& summary) const {
  summary["train_images"] = data_.train.count();
  summary["held_out_images"] = eval_images_ / world_.size() * world_.size();
  summary["data"] = data_.train.source;
}

}  // namespace skew::moe
