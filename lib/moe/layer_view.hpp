// What a balancing policy sees of one MoE layer (policies/policy.hpp): its options, world,
// placement, this step's routing and context, its time and byte counters and the experts' state
// this rank holds. MoeLayer (moe_layer.hpp) is the one implementation; the policy interface
// depends on this view, not on the layer, and the layer on the interface alone.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/device_array.hpp"
#include "core/tensor.hpp"
#include "lib/moe/gate.hpp"
#include "lib/moe/ops.hpp"
#include "lib/placement/placement.hpp"

namespace skew::comm {
class ProcessGroup;
}

namespace skew::moe {

enum class Policy { Static, DeepSpeed, FasterMoE, FlexMoE };
Policy parse_policy(const std::string& name);

struct MoeOptions {
  int d_model = 16, d_ff = 32;
  GateOptions gate;
  Policy policy = Policy::Static;
  double capacity_factor_train = 1.0, capacity_factor_eval = 1.0;  // deepspeed (policies/deepspeed.hpp)
  std::int64_t min_capacity = 4;                                   // deepspeed: least slots per expert
  bool drop_tokens = true;                                         // deepspeed: false = dropless, padded to max load
  bool use_rts = true;                                             // deepspeed: top-1 random token selection
  bool drop_by_probability = false;                                // deepspeed: keep the most probable
  Precision precision = Precision::Fp32;                           // of the expert FFN GEMMs (the model sets it)
  // FasterMoE's smart schedule (smart_schedule.hpp): 0 = one blocking all-to-all, then the expert
  // compute; c >= 1 = pairwise stages, each peer's rows in c chunks, the exchange of the next
  // chunk overlapping the compute of the current one, forward and backward. moe_train sets it
  // from moe.fastermoe_chunks under the fastermoe policy. The rows computed do not depend on it
  // (float64 bit for bit; float to OpenBLAS's rounding of a smaller GEMM).
  int schedule_chunks = 0;
  // Where the layer's data plane runs: every per-token array (x, y, dy, dx, wg, dwg passed in,
  // the gate's, the exchange buffers, the expert activations) and the experts' parameters,
  // gradients and AdamW moments, and fastermoe's shadow copies live there. Cuda: float only,
  // every policy and the smart schedule; the host sees only the per-expert counts, the scalar
  // losses and, for deepspeed's token dropping, the expert choices.
  Device device = Device::Host;
  std::int64_t expert_params() const { return 2LL * d_model * d_ff + d_ff + d_model; }
};

// What one forward pass of every layer shares.
struct StepContext {
  bool training = true;
  const std::int32_t* forced = nullptr;  // replayed expert choices [n * k], or null
  const void* jitter = nullptr;          // gate input noise [n * d] of the layer's scalar type, or null
  // Key the step's random choices (DeepSpeed's random token selection), so that a step, and a
  // resumed run, is reproducible: the run's seed, the iteration and the MoE layer's index.
  std::uint64_t seed = 0;
  std::int64_t iteration = 0;
  int layer = 0;
};

// Per step: wall seconds by phase; expert_cpu = this thread's CPU seconds in the expert FFNs
// (immune to other processes sharing the cores); bytes this rank sends to other ranks in the
// four all-to-all rounds, in replica gradient all-reduce (ring: 2 (n-1)/n of the buffer), in
// fastermoe's shadow exchange (parameter broadcast: the buffer, from the owner; gradient reduce:
// the buffer, from every other rank to the owner) and in moving expert state to new replicas
// before the step (flexmoe placement changes, counted by the policy's re-plan).
struct LayerTimes {
  double gate = 0, dispatch = 0, expert = 0, combine = 0, alltoall = 0, sync = 0;
  double expert_cpu = 0, alltoall_bytes = 0, sync_bytes = 0, move_bytes = 0;
};

template <class T>
struct ExpertState {
  Tensor w, m, v;    // parameters and AdamW moments, flat, on the layer's device
  DeviceArray<T> g;  // gradients, on the layer's device
};

template <class T>
class LayerView {
 public:
  virtual const MoeOptions& options() const = 0;
  virtual comm::ProcessGroup& world() const = 0;
  virtual const placement::LayerPlacement& placement() const = 0;
  virtual void set_placement(placement::LayerPlacement p) = 0;
  virtual const GateState<T>& gate_state() const = 0;
  virtual const StepContext& step() const = 0;  // of the current forward
  virtual LayerTimes& times() = 0;
  // The replicas this rank holds; mutable access counts as a weight change (see MoeLayer).
  virtual std::map<int, ExpertState<T>>& experts() = 0;
  // Marks the experts' bf16 weight copies stale (parameters changed or lent for this step).
  virtual void weights_changed() = 0;

 protected:
  ~LayerView() = default;
};

}  // namespace skew::moe
