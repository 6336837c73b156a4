// A small Swin Transformer with MoE feed-forward layers (Swin-MoE, Tutel's swin_moe): patch
// embedding (a stride-p convolution as a linear over patches) + LayerNorm; stage 1 of
// pre-LayerNorm blocks alternating window attention (W-MSA) and shifted-window attention
// (SW-MSA, cyclic shift by window/2 with its mask), each with relative position bias, and dense
// GELU FFNs; patch merging (2 x 2 concat, LayerNorm, linear 4C -> 2C); stage 2 at width 2C and
// twice the heads, its FFN an MoE layer in every block or every other one (opt.moe_every; Swin-MoE
// puts MoE in every other block of its last stages); final LayerNorm, mean pool, linear head,
// cross-entropy. A stage whose map is no wider than the window attends within one window and
// does not shift (as Swin does). The loss is the global mean over all ranks' images plus the
// gates' auxiliary losses, so any world size computes the same function.
#pragma once
#include <cstdint>
#include <vector>

#include "lib/moe/models/network.hpp"

namespace skew::moe {

struct SwinShape {
  int image = 28, channels = 1, patch = 2, window = 7, classes = 10;
  int stage1_blocks = 2;  // stage 2 has opt.layers blocks: moe_layers() counts its MoE layers
};

template <class T>
class SwinMoe : public MoeNetwork<T> {
 public:
  // opt.d_model: stage 1's width C; opt.heads: stage 1's heads; opt.d_ff: stage 1's dense FFN
  // width (stage 2's is twice it); opt.moe.d_model is set to 2C. Every MoE layer consults
  // `policy`; null = the one opt.moe.policy names.
  SwinMoe(const ModelOptions& opt, const SwinShape& shape, comm::ProcessGroup& world,
          const std::vector<placement::LayerPlacement>& placements,
          std::shared_ptr<BalancingPolicy<T>> policy = nullptr);
  void init(std::uint64_t seed);

  // Forward on `batch` local images (pixels [batch, image, image, channels], labels [batch]);
  // with `backward`, accumulates gradients too (call zero_grads first). Returns the global loss.
  double step(const T* pixels, const std::int32_t* labels, int batch, const StepInputs& in, bool backward);
  double last_ce() const { return last_ce_; }
  std::int64_t last_correct() const { return last_correct_; }  // global top-1 hits of the last step
  const SwinShape& shape() const { return shape_; }
  int tokens_per_image() const;  // in stage 2, where the MoE layers route
  using MoeNetwork<T>::param;
  using MoeNetwork<T>::grad;

 private:
  using MoeNetwork<T>::opt_;
  using MoeNetwork<T>::world_;
  using MoeNetwork<T>::moe_;
  using MoeNetwork<T>::add;
  struct Stage {
    int res, width, heads, window, blocks, d_ff;
    std::vector<T> mask;  // shifted windows' mask, or empty when the stage never shifts
  };
  struct BlockActs {
    std::vector<T> x_in, ln1, mean1, rstd1, win, qkv, att, probs, x_mid, ln2, mean2, rstd2, hpre, h;
  };
  struct BlockRef {
    int stage, block, moe;  // moe: index in moe_, or -1
  };
  std::string name(const BlockRef& b, const char* what) const;
  int shift_of(const BlockRef& b) const;
  double block_forward(const BlockRef& b, int batch, std::vector<T>& x, const StepInputs& in);
  void block_backward(const BlockRef& b, int batch, std::vector<T>& dx);
  std::vector<const BlockRef*> stage_blocks(int stage) const;
  // Patch embedding, stage 1, patch merging, stage 2: `x` ends as stage 2's output. Returns the
  // MoE layers' auxiliary loss.
  double stages_forward(const T* pixels, int batch, std::vector<T>& x, const StepInputs& in);
  // Final LayerNorm, mean pool, head and cross-entropy over `global_batch` images; sets last_*
  // and the logits' gradient. Returns the global cross-entropy.
  double head_forward(const std::vector<T>& x, const std::int32_t* labels, int batch, double global_batch,
                      std::vector<T>& dlogits);
  void step_backward(int batch, const std::vector<T>& dlogits);

  SwinShape shape_;
  Stage stages_[2];
  std::vector<BlockRef> blocks_;
  std::vector<BlockActs> acts_;
  std::vector<T> patches_, embed_, embed_mean_, embed_rstd_, stage1_out_, merged_, merged_ln_, merge_mean_, merge_rstd_,
      final_in_, final_ln_, final_mean_, final_rstd_, pooled_, logits_;
  double last_ce_ = 0;
  std::int64_t last_correct_ = 0;
};

}  // namespace skew::moe
