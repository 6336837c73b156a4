// FlexMoE (Nie et al., SIGMOD 2023): dynamic expert management. Routing is never changed;
// instead experts get replicas in spare "vExpert" slots, each replica computing a share of its
// expert's tokens and the replicas' gradients all-reduced among them, and between iterations a
// planner re-places replicas from the monitored load (lib/placement: monitor, cost model, greedy
// planner, executor).
//
// Shares: the paper splits an expert's tokens evenly among its replicas; the planner here can
// also level them by predicted rank load ("balanced"), and our "live" variant re-levels them
// every step from that step's global counts (placement.shares).
#pragma once
#include "lib/moe/policies/static.hpp"

namespace skew::moe {

template <class T>
class FlexMoePolicy : public StaticPolicy<T> {
 public:
  explicit FlexMoePolicy(bool live_shares) : live_shares_(live_shares) {}
  placement::LayerPlacement replica_shares(const MoeLayer<T>& layer,
                                           const std::vector<std::int64_t>& all_counts) const override;

 private:
  bool live_shares_;
};

}  // namespace skew::moe
