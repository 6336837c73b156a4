// One MoE feed-forward layer, expert-parallel over the world group: gate -> the balancing
// policy's plan and drops -> per-source split among each expert's replicas -> permute into
// (rank, expert) blocks -> all-to-all-v -> local experts' FFN (GEMM) -> all-to-all-v back (or the two
// exchanges in FasterMoE's pipelined stages, smart_schedule.hpp) ->
// weighted combine; and the backward through all of it. The policy (lib/moe/policies) is
// consulted at fixed points of the step; the layer never asks which one it holds. Expert e's FFN: y = gelu(x W1 + b1)
// W2 + b2, its parameters packed flat [W1 | b1 | W2 | b2] so replicas (and a policy's lent copies) move as one buffer.
// Routing is in moe_layer_route.cpp, the smart schedule in moe_layer_schedule.cpp; the data plane
// runs on MoeOptions::device through the kernels of kernels/moe_*.hpp (one body, host or CUDA).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device_array.hpp"
#include "lib/moe/layer_view.hpp"
#include "mpi/process_group.hpp"

namespace skew::moe {

template <class T>
class BalancingPolicy;

template <class T>
class MoeLayer final : public LayerView<T> {
 public:
  // `policy` may be shared by all layers of a model; null = the one opt.policy names.
  MoeLayer(const MoeOptions& opt, comm::ProcessGroup& world, placement::LayerPlacement placement,
           std::shared_ptr<BalancingPolicy<T>> policy = nullptr);
  // Initialises the replicas this rank holds from a generator keyed by (seed, layer, expert),
  // so every replica of an expert and every world size get the same weights.
  void init_experts(std::uint64_t seed, int layer, double stddev);

  void forward(int n, const T* x, const T* wg, const StepContext& ctx, T* y);
  // dy -> dx (written); accumulates dwg and local expert gradients.
  void backward(const T* dy, const T* wg, T* dx, T* dwg);
  // The policy's gradient reduction (e.g. within each replica group).
  void reduce_replica_grads();

  const placement::LayerPlacement& placement() const override { return placement_; }
  void set_placement(placement::LayerPlacement p) override { placement_ = std::move(p); }
  // Mutable access to the experts' state counts as a weight change (the optimizer's step, a
  // checkpoint's load, a replica move): the bf16 weight copies are rounded again at the next forward.
  std::map<int, ExpertState<T>>& experts() override {
    weights_changed();
    return experts_;
  }
  // Marks the experts' bf16 weight copies stale, so the next forward rounds them from the fp32
  // weights again (the backward keeps its forward's copies): for code that writes weights through
  // pointers it kept from an earlier experts() call.
  void weights_changed() override;
  ExpertState<T>& create_expert(int e);
  const GateState<T>& gate_state() const override { return gate_; }
  const StepContext& step() const override { return step_; }  // of the current forward
  const std::vector<char>& kept() const { return kept_; }     // [n*k]: 0 where the policy dropped the assignment
  std::int64_t dropped() const { return dropped_; }           // assignments dropped this step, global
  std::int64_t padded() const { return padded_; }             // zero rows computed this step, global
  std::int64_t computed_rows() const { return static_cast<std::int64_t>(xe_.size()) / opt_.d_model; }  // on this rank
  LayerTimes& times() override { return times_; }
  const MoeOptions& options() const override { return opt_; }
  comm::ProcessGroup& world() const override { return world_; }

 private:
  void route();
  int split_replicas(const std::vector<std::int64_t>& kept_count);  // moe_layer_route.cpp
  void regroup_received(const std::vector<std::int64_t>& block);
  // Expert e's parameters and gradients: the replica this rank holds, else the copy the policy
  // lends it for this step.
  T* params_of(int e);
  T* grads_of(int e);
  // Local experts (ids) and their rows: group g is rows [offsets[g], offsets[g+1]) of the row
  // pointers a call is given (offsets[0] = 0).
  struct ExpertGroups {
    std::vector<int> experts;
    std::vector<std::int64_t> offsets;
  };
  // moe_layer_experts.cpp: the FFNs of all the groups' experts, one grouped GEMM per product.
  // Rounds the bf16 copies of this step's experts that are missing or stale (a no-op without Bf16).
  void round_expert_weights();
  void experts_forward(const ExpertGroups& groups, const T* x, T* hpre, T* h, T* y);
  // The backward of rows that depends on the rows alone: dhpre = (dy W2^T) * gelu'(hpre), dx = dhpre W1^T.
  void experts_backward_rows(const ExpertGroups& groups, const T* hpre, const T* dy, T* dhpre, T* dx);
  // The parameter gradients of all of each expert's rows: one GEMM per matrix over the whole
  // block, so that the sum runs in the same order whatever the schedule.
  void experts_weight_grads(const ExpertGroups& groups, const T* x, const T* h, const T* dy, const T* dhpre);
  // c_g = a_g op(W) + beta c_g for each group, W = W1 (matrix 0) or W2 (matrix 1) of its expert.
  void experts_gemm(const ExpertGroups& groups, int matrix, bool trans_b, int n, int k, const T* a, T beta, T* c);
  // dW[g] += a_g^T b_g for each group, into W1's (matrix 0) or W2's (matrix 1) gradient.
  void experts_weight_gemm(const ExpertGroups& groups, int matrix, int m, int n, const T* a, const T* b);
  ExpertGroups all_local_experts() const { return {local_experts_, local_offset_}; }
  // One expert's rows as a call of their own (the smart schedule's per-part calls).
  static ExpertGroups one_expert(int e, std::int64_t rows) { return {{e}, {0, rows}}; }
  // The smart schedule's stages (moe_layer_schedule.cpp): forward from the packed send rows to
  // back_ (ye: expert outputs, expert-contiguous), backward from dsend to dback.
  void forward_pipelined(const DeviceArray<T>& send, DeviceArray<T>& recv, DeviceArray<T>& ye);
  void backward_pipelined(const DeviceArray<T>& dsend, DeviceArray<T>& dback, DeviceArray<T>& dye,
                          DeviceArray<T>& dhpre);
  // One local expert's rows inside one source rank's rows [begin, end) of the receive buffer:
  // contiguous in the expert-contiguous buffers, starting at row xe_begin.
  struct ExpertRows {
    int local = 0;  // index into local_experts_
    std::int64_t xe_begin = 0, rows = 0;
  };
  std::vector<ExpertRows> expert_rows_of(int source, std::int64_t begin, std::int64_t end) const;

  MoeOptions opt_;
  comm::ProcessGroup& world_;
  placement::LayerPlacement placement_;
  std::shared_ptr<BalancingPolicy<T>> policy_;
  std::map<int, ExpertState<T>> experts_;

  GateState<T> gate_;
  StepContext step_;
  int n_ = 0;
  std::vector<char> kept_;                          // [n*k]
  std::vector<std::size_t> send_rows_, recv_rows_;  // per peer
  std::vector<std::int64_t> recv_expert_rows_;      // [N * E] rows of expert e from source r
  std::vector<int> local_experts_;                  // experts computed here this step, ascending
  std::vector<std::int64_t> local_offset_;          // rows before each local expert's block
  // On the layer's device. pos_: [n*k] row in the send buffer, >= its row count when dropped.
  DeviceArray<std::int64_t> pos_, local_pos_;  // local_pos_: received row -> row in expert-contiguous order
  DeviceArray<T> back_, xe_, hpre_, h_;        // activations kept for the backward
  // Scratch of route(), forward() and backward(), grown once and reused every step.
  DeviceArray<std::uint8_t> kept_flags_;
  DeviceArray<std::int32_t> keys_;
  DeviceArray<std::int64_t> counts_, order_, offsets_, replica_end_, block_begin_, block_target_;
  DeviceArray<std::int32_t> replica_rank_;
  DeviceArray<T> send_, recv_, ye_, dsend_, dweight_, drecv_, dye_, dxe_, dhpre_, dback_;
  // Bf16 copies [W1 | W2] of the experts' weights (float layer, Precision::Bf16), by expert;
  // stale: every local expert's copy is rounded again at the next forward.
  std::map<int, DeviceArray<std::uint16_t>> bf16_weights_;
  bool bf16_stale_ = true;
  DeviceArray<std::uint16_t> activation_bf16_;  // a GEMM's row operand, rounded
  std::int64_t dropped_ = 0, padded_ = 0;
  LayerTimes times_;
};

}  // namespace skew::moe
