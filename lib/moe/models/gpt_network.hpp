// GPT-style decoder with MoE feed-forward layers: token + position embedding, pre-LayerNorm
// blocks (causal multi-head self-attention, then a dense or MoE FFN; MoE in every block or in
// every other one), final LayerNorm, LM head tied to the token embedding, cross-entropy.
// Parameters and MoE layers as every family holds them (network.hpp). The loss is the global mean
// over all ranks' tokens plus the gates' auxiliary losses, so any world size computes the same
// function.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/moe/models/network.hpp"

namespace skew::moe {

template <class T>
class GptMoe : public MoeNetwork<T> {
 public:
  // Every MoE layer consults `policy`; null = the one opt.moe.policy names.
  GptMoe(const ModelOptions& opt, comm::ProcessGroup& world, const std::vector<placement::LayerPlacement>& placements,
         std::shared_ptr<BalancingPolicy<T>> policy = nullptr);
  void init(std::uint64_t seed);

  // Forward on `batch` local sequences (tokens and targets: batch * seq_len each); with
  // `backward`, accumulates gradients too (call zero_grads first). Returns the global loss.
  double step(const std::int32_t* tokens, const std::int32_t* targets, int batch, const StepInputs& in, bool backward);
  double last_ce() const { return last_ce_; }
  using MoeNetwork<T>::param;
  using MoeNetwork<T>::grad;

 private:
  using MoeNetwork<T>::opt_;
  using MoeNetwork<T>::world_;
  using MoeNetwork<T>::dense_w_;
  using MoeNetwork<T>::dense_g_;
  using MoeNetwork<T>::segments_;
  using MoeNetwork<T>::offset_of_;
  using MoeNetwork<T>::moe_;
  using MoeNetwork<T>::add;
  struct BlockActs {
    std::vector<T> x_in, ln1, mean1, rstd1, qkv, att, probs, x_mid, ln2, mean2, rstd2, hpre, h;
  };
  std::vector<int> moe_index_;  // block -> index in moe_, or -1
  std::vector<BlockActs> acts_;
  std::vector<T> x_final_, lnf_, meanf_, rstdf_, logits_;
  std::vector<std::int32_t> tokens_;
  double last_ce_ = 0;
};

}  // namespace skew::moe
