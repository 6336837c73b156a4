// GPT-style decoder with MoE feed-forward layers: token + position embedding, pre-LayerNorm
// blocks (causal multi-head self-attention, then a dense or MoE FFN; MoE in every block or in
// every other one), final LayerNorm, LM head tied to the token embedding, cross-entropy.
// With `causal` off the same network is BERT's bidirectional encoder (models/bert.hpp).
// Parameters and MoE layers as every family holds them (network.hpp), on opt.device; each block's
// dense chain is gpt_block.hpp's, the one the dense block harness tests. The loss is the global mean
// over all ranks' targeted positions (every token for GPT, the masked ones for BERT) plus the
// gates' auxiliary losses, so any world size computes the same function.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/moe/models/gpt_block.hpp"
#include "lib/moe/models/network.hpp"

namespace skew::moe {

// A position whose target is kNoTarget is not in the objective (BERT's unmasked positions).
inline constexpr std::int32_t kNoTarget = -1;

template <class T>
class GptMoe : public MoeNetwork<T> {
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
  // This rank's logits of its targeted positions, in position order, [targeted, vocab] (a host
  // copy).
  std::vector<T> last_logits() const { return logits_.host_copy(); }
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
  GptBlockShape block_shape(int batch) const;
  GptBlockParams<const T> block_weights(int l);
  GptBlockParams<T> block_grads(int l);
  // `count` host ids where the ops of this network's device read them: `host` itself on the
  // host, else a copy in `slot`.
  template <class I>
  const I* ids_on_device(DeviceArray<I>& slot, const I* host, std::size_t count);
  // One step's rows where the ops read them: n positions, of which m are in the objective (all,
  // or BERT's masked ones at `rows`), their token and target ids, and the head's input. On the
  // host the pointers point into the vectors here: the struct is filled in place, never moved.
  struct StepRows {
    std::vector<std::int64_t> positions;  // the targeted positions
    std::vector<std::int32_t> target_ids;
    int batch = 0, n = 0, m = 0;
    bool all_targeted = true;
    double global_targeted = 0;  // targeted positions over all ranks: the loss's denominator
    const std::int32_t* tokens = nullptr;
    const std::int32_t* targets = nullptr;
    const std::int64_t* rows = nullptr;
    const T* head_in = nullptr;
  };
  void find_rows(StepRows& r, const std::int32_t* tokens, const std::int32_t* targets, int batch);
  // The blocks' forward on x_; returns the MoE layers' auxiliary loss.
  double blocks_forward(const StepRows& r, const StepInputs& in);
  // Final LayerNorm, LM head and cross-entropy of the targeted rows (sets r.head_in, last_*).
  void head_forward(StepRows& r);
  void step_backward(const StepRows& r);
  std::vector<int> moe_index_;  // block -> index in moe_, or -1
  std::vector<GptBlockActs<T>> acts_;
  // On the device: the residual stream and its gradient, a block's FFN output and its input's
  // gradient, the final LayerNorm, the head's input rows (the targeted ones, when not all are),
  // logits and their gradient, the step's token and target ids, and the targeted rows' positions.
  DeviceArray<T> x_, dx_, f_, dln_, x_final_, lnf_, meanf_, rstdf_, head_in_, dhead_, logits_, dlogits_;
  DeviceArray<std::int32_t> tokens_, targets_;
  DeviceArray<std::int64_t> targeted_rows_;
  double last_ce_ = 0, last_targeted_ = 0, last_correct_ = 0;
};

}  // namespace skew::moe
