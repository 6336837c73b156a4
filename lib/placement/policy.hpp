// The interface between the MoE trainer (lib/moe) and FlexMoE's dynamic placement
// (lib/placement). The trainer owns the experts; the policy decides where replicas live; the
// executor moves expert state to realise a decision. All calls are collective over the world
// group and every rank passes identical counts, so every rank computes the same plan.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/safetensors.hpp"
#include "lib/placement/placement.hpp"

namespace skew::comm {
class ProcessGroup;
}

namespace skew::placement {

// Tokens routed to each expert of each MoE layer in one iteration, summed over all ranks:
// counts[layer][expert].
using RoutingCounts = std::vector<std::vector<std::int64_t>>;

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  // After every iteration: the global routing counts and the measured step time.
  virtual void observe(std::int64_t iteration, const RoutingCounts& counts, double step_seconds) = 0;
  // Before every iteration: the placement per layer to use from now on (return `current`
  // unchanged for no change). Deterministic given the observed history.
  virtual std::vector<LayerPlacement> plan(std::int64_t iteration, const std::vector<LayerPlacement>& current) = 0;
  // Everything plan() depends on besides the placements (load history, cost constants, ...), as
  // named host tensors identical on every rank: a checkpoint holds them so that a resumed run
  // plans exactly as an unbroken one would.
  virtual std::vector<std::pair<std::string, Tensor>> save_state() const = 0;
  // Restores save_state()'s tensors from `file`; throws naming a missing or misshapen tensor.
  virtual void load_state(const TensorFile& file) = 0;
};

// What the executor needs from the runtime: the state (parameters, gradients' optimiser moments)
// of the replica of (layer, expert) held on this rank, as a list of tensors whose shapes
// are the same for every expert of a layer, on one device (host or cuda) on every rank.
class ExpertStateStore {
 public:
  virtual ~ExpertStateStore() = default;
  virtual std::vector<Tensor*> replica_state(int layer, int expert) = 0;
  // Allocate state for a replica this rank is about to receive (contents are then overwritten).
  virtual void create_replica(int layer, int expert) = 0;
  // Free the state of a replica this rank no longer holds.
  virtual void drop_replica(int layer, int expert) = 0;
};

// Moves expert state from `before` to `after` for every layer: each new replica receives the
// state of an existing replica point-to-point; dropped replicas are freed. Then checks that all
// ranks agree on `after` (throws naming the first rank that differs). Returns the bytes this rank
// sent, per layer.
std::vector<double> apply_placement(comm::ProcessGroup& world, ExpertStateStore& store,
                                    const std::vector<LayerPlacement>& before,
                                    const std::vector<LayerPlacement>& after);

}  // namespace skew::placement
