// FasterMoE's dynamic shadowing (He et al., PPoPP 2022): every iteration, after the gate, the
// hottest experts are "shadowed": their owner broadcasts their parameters to every rank, each
// rank computes its own tokens of them locally instead of sending them away, and the shadows'
// gradients are reduced back to the owner, the only rank that updates the expert. Which experts
// to shadow is chosen greedily from the hottest down while the predicted step time falls, on the
// same measured cost model FlexMoE plans with (lib/placement/shadowing.hpp). The rest as in
// StaticPolicy. FasterMoE's smart schedule (all-to-all pipelined with expert compute in chunks)
// is the layer's MoeOptions::schedule_chunks (smart_schedule.hpp); the decision models its
// stages as the cost model's pipeline stages.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "lib/moe/policies/static.hpp"
#include "lib/placement/flexmoe.hpp"

namespace skew::moe {

template <class T>
class FasterMoePolicy : public StaticPolicy<T> {
 public:
  // `model`: the cost model of this run's expert (shape) and machine (constants).
  explicit FasterMoePolicy(placement::CostModel model) : model_(std::move(model)) {}
  // Chooses this step's shadows from all ranks' counts and broadcasts their parameters.
  void plan(LayerView<T>& layer) override;
  // A shadowed expert's tokens stay on their rank, computed there from its shadow copy.
  bool computed_where_routed(const LayerView<T>& layer, int e) const override;
  T* lent_params(const LayerView<T>& layer, int e) override;
  T* lent_grads(const LayerView<T>& layer, int e) override;
  // Reduces the shadows' gradients to their owners, then the replicas' as StaticPolicy does,
  // and drops the step's shadow copies.
  void reduce_grads(LayerView<T>& layer) override;
  // The record's "shadowed": per layer, the experts shadowed this iteration.
  void record(const typename BalancingPolicy<T>::Layers& layers, Json& record) const override;
  // The cost model's "cost_constants".
  void summarise(Json& summary) const override;
  const placement::CostModel& model() const { return model_; }
  // The experts `layer` shadows this step (ascending; none before its first plan).
  const std::vector<int>& shadowed(const LayerView<T>& layer) const;

 private:
  // One layer's shadows this step: which experts, and the copies of those this rank does not
  // hold (parameters lent by the owner, gradients to return to it; on the layer's device).
  struct Copy {
    explicit Copy(Device device) : w(device), g(device) {}
    DeviceArray<T> w, g;
  };
  struct Shadows {
    std::vector<int> experts;
    std::vector<char> flag;  // [E]
    std::map<int, Copy> copies;
  };
  // Expert e's copy in `shadows`, made on first use (the layer's bf16 weight copies go stale).
  Copy& lend(LayerView<T>& layer, Shadows& shadows, int e);
  // The copy of expert e lent to `layer` this step, or null.
  Copy* copy_of(const LayerView<T>& layer, int e);
  void reduce_shadow_grads(LayerView<T>& layer, Shadows& shadows);
  placement::CostModel model_;
  // By layer: one policy serves every MoE layer of a model.
  std::map<const LayerView<T>*, Shadows> shadows_;
};

// The FasterMoE policy for experts of `options`: cost constants not given in `placement` are
// measured over `world` (collective; every rank gets rank 0's values), as make_flexmoe does.
template <class T>
std::shared_ptr<FasterMoePolicy<T>> make_fastermoe(const placement::PlacementOptions& placement,
                                                   comm::ProcessGroup& world, const MoeOptions& options);

}  // namespace skew::moe
