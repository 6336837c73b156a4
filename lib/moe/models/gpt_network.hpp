// GPT-style decoder with MoE feed-forward layers: token + position embedding, pre-LayerNorm
// blocks (causal multi-head self-attention, then a dense or MoE FFN; MoE in every block or in
// every other one), final LayerNorm, LM head tied to the token embedding, cross-entropy.
// With `causal` off the same network is BERT's bidirectional encoder (models/bert.hpp).
// Dense parameters live in one flat vector (data-parallel: gradients all-reduced); experts live
// in the MoE layers (expert-parallel). The loss is the global mean over all ranks' targeted
// positions (every token for GPT, the masked ones for BERT) plus the gates' auxiliary losses,
// so any world size computes the same function.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/moe/moe_layer.hpp"

namespace skew::moe {

struct ModelOptions {
  int vocab = 256, d_model = 16, heads = 2, layers = 2, seq_len = 8, d_ff = 32;
  int moe_every = 1;  // 1: every block is MoE; 2: blocks 1, 3, 5, ... are MoE
  bool causal = true;  // false: every position attends to the whole sequence (BERT)
  double init_std = 0.02;
  double jitter = 0.0;  // gate input noise amplitude while training
  // Of every matrix product but the router's: bf16 inputs with fp32 accumulation; parameters
  // (the master weights), gradients and optimizer state stay in T either way.
  Precision precision = Precision::Fp32;
  MoeOptions moe;
  bool is_moe_block(int block) const { return moe_every == 1 || block % moe_every == moe_every - 1; }
  int moe_layers() const;
};

// A position whose target is kNoTarget is not in the objective (BERT's unmasked positions).
inline constexpr std::int32_t kNoTarget = -1;

struct Segment {
  std::string name;
  std::size_t offset = 0, size = 0;
};

struct StepInputs {
  bool training = true;
  std::int64_t iteration = 0;  // keys the jitter noise
  std::uint64_t seed = 0;
  std::vector<const std::int32_t*> forced;  // per MoE layer: replayed choices, or empty
};

template <class T>
class GptMoe {
 public:
  // Every MoE layer consults `policy`; null = the one opt.moe.policy names.
  GptMoe(const ModelOptions& opt, comm::ProcessGroup& world, const std::vector<placement::LayerPlacement>& placements,
         std::shared_ptr<BalancingPolicy<T>> policy = nullptr);
  void init(std::uint64_t seed);

  // Forward on `batch` local sequences (tokens and targets: batch * seq_len each; a target of
  // kNoTarget leaves its position out of the objective); with `backward`, accumulates gradients
  // too (call zero_grads first). Returns the global loss.
  double step(const std::int32_t* tokens, const std::int32_t* targets, int batch, const StepInputs& in, bool backward);
  // Of the last step, over all ranks: mean cross-entropy of the targeted positions, how many
  // there were, and how many of them the logits' argmax predicts.
  double last_ce() const { return last_ce_; }
  double last_targeted() const { return last_targeted_; }
  double last_correct() const { return last_correct_; }
  // This rank's logits of its targeted positions, in position order, [targeted, vocab].
  const std::vector<T>& last_logits() const { return logits_; }
  void zero_grads();
  // Dense gradients all-reduced over the world; expert gradients within replica groups.
  void sync_grads();

  const ModelOptions& options() const { return opt_; }
  std::vector<T>& dense_w() { return dense_w_; }
  std::vector<T>& dense_g() { return dense_g_; }
  const std::vector<Segment>& segments() const { return segments_; }
  T* param(const std::string& name);
  std::vector<std::unique_ptr<MoeLayer<T>>>& moe() { return moe_; }
  double sync_seconds() const { return sync_seconds_; }

 private:
  std::size_t add(const std::string& name, std::size_t size);
  struct BlockActs {
    std::vector<T> x_in, ln1, mean1, rstd1, qkv, att, probs, x_mid, ln2, mean2, rstd2, hpre, h;
  };
  ModelOptions opt_;
  comm::ProcessGroup& world_;
  std::vector<T> dense_w_, dense_g_;
  std::vector<Segment> segments_;
  std::map<std::string, std::size_t> offset_of_;
  std::vector<std::unique_ptr<MoeLayer<T>>> moe_;
  std::vector<int> moe_index_;  // block -> index in moe_, or -1
  std::vector<BlockActs> acts_;
  std::vector<T> x_final_, lnf_, meanf_, rstdf_, head_in_, logits_;
  double last_ce_ = 0, last_targeted_ = 0, last_correct_ = 0, sync_seconds_ = 0;
};

}  // namespace skew::moe
