// Plain expert parallelism (GShard, Switch Transformer), without any balancing: every expert's
// tokens go to its replicas by their placement shares (one replica per expert unless a
// placement says otherwise), every token is kept however skewed the routing, and replicas'
// gradients are all-reduced among them. Not a paper's balancing mechanism: the baseline the
// other policies start from and change only where their paper does.
#pragma once
#include "lib/moe/policies/policy.hpp"

namespace skew::moe {

template <class T>
class StaticPolicy : public BalancingPolicy<T> {
 public:
  void plan(LayerView<T>&) override {}
  void keep(const LayerView<T>&, bool, std::vector<char>&) const override {}
  placement::LayerPlacement replica_shares(const LayerView<T>& layer,
                                           const std::vector<std::int64_t>& all_counts) const override;
  // Every expert's tokens go to its replicas; nothing is lent.
  bool computed_where_routed(const LayerView<T>&, int) const override { return false; }
  T* lent_params(const LayerView<T>&, int) override { return nullptr; }
  T* lent_grads(const LayerView<T>&, int) override { return nullptr; }
  std::int64_t pad(const LayerView<T>&, std::vector<std::int64_t>&) const override { return 0; }
  void reduce_grads(LayerView<T>& layer) override;
  // One replica per expert, nothing re-planned, learned, recorded or saved.
  int slots_per_rank(int experts, int ranks) const override { return experts / ranks; }
  void replan(std::int64_t, typename BalancingPolicy<T>::Layers&, placement::ExpertStateStore&) override {}
  void observe(std::int64_t, const typename BalancingPolicy<T>::Layers&, double) override {}
  void record(const typename BalancingPolicy<T>::Layers&, Json&) const override {}
  void summarise(Json&) const override {}
  std::vector<std::pair<std::string, Tensor>> save_state() const override { return {}; }
  void load_state(const TensorFile&) override {}

 protected:
  // Sums expert e's gradients over its replicas (a ring all-reduce within their ranks) when it
  // has more than one and this rank holds one.
  static void allreduce_replicas(LayerView<T>& layer, int e);
};

}  // namespace skew::moe
