// The Swin family: a SwinMoe network (swin_network.hpp) trained as an image classifier,
// cross-entropy over the classes, on MNIST (data.mnist_dir, its test.csv the held-out split) or a
// generated image set; top-1 accuracy on the held-out split beside the loss.
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "lib/moe/models/model.hpp"
#include "lib/moe/models/swin_data.hpp"
#include "lib/moe/models/swin_network.hpp"

namespace skew::moe {

class SwinModel : public Model {
 public:
  // The network's options from model.*, swin.stage2_blocks, train.precision and moe.jitter, with
  // the MoE layers' options `moe` (their width: stage 2's, 2 * model.d_model).
  static ModelOptions options(const MoeTrainOptions& options, MoeOptions moe);
  // Reads or generates the images and builds and initialises the network (train.seed) with one
  // placement per MoE layer, all its layers consulting `policy`.
  SwinModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
            const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<float>> policy);

  MoeNetwork<float>& network() override { return net_; }
  std::int64_t tokens_per_step() const override;
  double train_step(std::int64_t iteration, const std::vector<const std::int32_t*>& forced) override;
  double last_objective() const override { return net_.last_ce(); }
  // Mean cross-entropy over train.eval_sequences evenly spaced held-out images (at most all of
  // them), split over the ranks; their top-1 accuracy is kept for validation_metrics ("accuracy",
  // recorded as "val_accuracy").
  double validation_loss() override;
  Json validation_metrics() const override;
  // Where the images came from (the trainer adds the last evaluation's final_val_accuracy).
  void summarise(Json& summary) const override;

 private:
  SwinModel(const MoeTrainOptions& run, const ModelOptions& options, comm::ProcessGroup& world,
            const std::vector<placement::LayerPlacement>& placements, std::shared_ptr<BalancingPolicy<float>> policy,
            ImageSplits data);
  static ImageSplits read_images(const MoeTrainOptions& run);

  comm::ProcessGroup& world_;
  ImageSplits data_;
  int batch_;  // images per rank per iteration
  std::uint64_t seed_;
  std::int64_t eval_images_;
  SwinMoe<float> net_;
  double accuracy_ = NAN;
  std::vector<float> pixels_;
  std::vector<std::int32_t> labels_;
};

}  // namespace skew::moe
