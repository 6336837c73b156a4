// A load-balancing policy: the one object an MoE model consults at fixed points of every step
// and between iterations, so that neither the layer nor the trainer asks which policy it holds.
// Each policy is one paper's mechanism, in its own file under lib/moe/policies/:
//   static.hpp     plain expert parallelism, the baseline every other policy starts from
//   deepspeed.hpp  DeepSpeed-MoE: capacity factor, dropping or padding
//   fastermoe.hpp  FasterMoE: shadowing hot experts on every rank
//   flexmoe.hpp    FlexMoE: dynamic expert replication and placement (lib/placement)
//
// Every hook is collective over the layer's (or model's) world group where it communicates, and
// every rank makes the same decision from the same global numbers. The hooks inside a step see
// the layer through its narrow view (layer_view.hpp); between iterations the policy gets the
// model's layers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.hpp"
#include "core/safetensors.hpp"
#include "lib/moe/layer_view.hpp"
#include "lib/placement/placement.hpp"

namespace skew::placement {
class ExpertStateStore;
}

namespace skew::moe {

template <class T>
class MoeLayer;

template <class T>
class BalancingPolicy {
 public:
  using Layers = std::vector<std::unique_ptr<MoeLayer<T>>>;
  virtual ~BalancingPolicy() = default;

  // Inside every MoE layer's step, in this order.
  // 1. Plan before routing: the gate has chosen this step's experts (layer.gate_state()).
  virtual void plan(LayerView<T>& layer) = 0;
  // 2. Which assignments are computed: `kept` ([tokens * top_k], all 1 on entry) is set to 0 for
  //    each assignment the policy drops.
  virtual void keep(const LayerView<T>& layer, bool training, std::vector<char>& kept) const = 0;
  // 3. Where each token's rows go: the share of a replicated expert's tokens each of its
  //    replicas computes this step, given every rank's kept counts ([ranks * experts]) ...
  virtual placement::LayerPlacement replica_shares(const LayerView<T>& layer,
                                                   const std::vector<std::int64_t>& all_counts) const = 0;
  //    An expert the policy has every rank compute for its own tokens this step (none by
  //    default): its tokens stay on their rank, whatever its placement ...
  virtual bool computed_where_routed(const LayerView<T>& layer, int e) const = 0;
  //    ... from the copy of its parameters the policy lends this rank, and into the gradients
  //    the policy collects in reduce_grads (null where the policy lends expert e none).
  virtual T* lent_params(const LayerView<T>& layer, int e) = 0;
  virtual T* lent_grads(const LayerView<T>& layer, int e) = 0;
  //    ... and the rows this rank sends in each (rank, expert) block ([ranks * experts], its kept
  //    rows on entry): returns the zero rows the policy adds to them.
  virtual std::int64_t pad(const LayerView<T>& layer, std::vector<std::int64_t>& block) const = 0;
  // 4. Gradient reduction after backward: every copy of an expert (replicas, shadows) ends with
  //    the gradient of all its tokens on every rank that updates it.
  virtual void reduce_grads(LayerView<T>& layer) = 0;

  // Between iterations, asked by the trainer.
  // Expert slots each rank offers: its memory budget for experts and their replicas.
  virtual int slots_per_rank(int experts, int ranks) const = 0;
  // 5. Re-plan before an iteration: where the experts' replicas live from now on, moving their
  //    state (`store`) to realise it.
  virtual void replan(std::int64_t iteration, Layers& layers, placement::ExpertStateStore& store) = 0;
  // After an iteration: what the policy learns from its routing and its wall time.
  virtual void observe(std::int64_t iteration, const Layers& layers, double step_seconds) = 0;
  // What the policy adds to the iteration's metrics record, and to the run's summary.
  virtual void record(const Layers& layers, Json& record) const = 0;
  virtual void summarise(Json& summary) const = 0;
  // Everything replan depends on besides the placements, as named host tensors identical on
  // every rank, for checkpoints; and restoring them from a checkpoint shard.
  virtual std::vector<std::pair<std::string, Tensor>> save_state() const = 0;
  virtual void load_state(const TensorFile& file) = 0;
};

// The policy MoeOptions::policy names, built from the options alone: static or deepspeed
// (fastermoe needs its measured cost model: make_fastermoe, fastermoe.hpp; flexmoe its placement
// machinery: make_flexmoe, flexmoe.hpp).
template <class T>
std::shared_ptr<BalancingPolicy<T>> make_policy(const MoeOptions& options);

}  // namespace skew::moe
