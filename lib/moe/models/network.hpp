// What every model family's network shares, and what the optimizer, checkpoints, placement
// moves and balancing policies act on: dense parameters in one flat buffer of named segments on
// the network's device (data-parallel: gradients all-reduced over the world) and the MoE layers
// (expert-parallel), whose data plane runs on the same device (MoeOptions::device).
// GptMoe (gpt_network.hpp) and SwinMoe (swin_network.hpp) derive from it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device_array.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/policies/policy.hpp"

namespace skew::moe {

struct ModelOptions {
  int vocab = 256, d_model = 16, heads = 2, layers = 2, seq_len = 8, d_ff = 32;
  int moe_every = 1;   // 1: every block is MoE; 2: blocks 1, 3, 5, ... are MoE
  bool causal = true;  // GptMoe's attention; false: every position sees the whole sequence (BERT)
  double init_std = 0.02;
  double jitter = 0.0;  // gate input noise amplitude while training
  // Of every matrix product but the router's: bf16 inputs with fp32 accumulation; parameters
  // (the master weights), gradients and optimizer state stay in T either way.
  Precision precision = Precision::Fp32;
  // Where the dense parameters, gradients and activations live and the dense ops run: Host, or
  // Cuda for float (double is the float64 reference, host only). The network sets its MoE
  // layers' MoeOptions::device to the same.
  Device device = Device::Host;
  MoeOptions moe;
  bool is_moe_block(int block) const { return moe_every == 1 || block % moe_every == moe_every - 1; }
  int moe_layers() const;
};

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
class MoeNetwork {
 public:
  virtual ~MoeNetwork() = default;
  void zero_grads();
  // Dense gradients all-reduced over the world; expert gradients within replica groups.
  void sync_grads();

  const ModelOptions& options() const { return opt_; }
  Device device() const { return opt_.device; }
  DeviceArray<T>& dense_w() { return dense_w_; }
  DeviceArray<T>& dense_g() { return dense_g_; }
  const std::vector<Segment>& segments() const { return segments_; }
  T* param(const std::string& name);
  T* grad(const std::string& name);
  std::vector<std::unique_ptr<MoeLayer<T>>>& moe() { return moe_; }
  double sync_seconds() const { return sync_seconds_; }

 protected:
  MoeNetwork(const ModelOptions& opt, comm::ProcessGroup& world);
  // Appends a dense parameter segment of `size` values; returns its offset. After the last one,
  // allocate_dense() places the parameters and gradients (zeros) on the device.
  std::size_t add(const std::string& name, std::size_t size);
  void allocate_dense();
  // MoE layer `layer` on n rows of x (its gate's weights wg) -> y, pointers on the network's
  // device; the step's context, jitter noise and replayed choices from `in`. Returns the gate's
  // auxiliary losses.
  double moe_forward(int layer, int n, const T* x, const T* wg, const StepInputs& in, T* y);
  // Its backward on the forward's rows: dy -> dx (overwritten), dwg += the gate weights'
  // gradient.
  void moe_backward(int layer, const T* dy, const T* wg, T* dx, T* dwg);

  ModelOptions opt_;
  comm::ProcessGroup& world_;
  DeviceArray<T> dense_w_, dense_g_;
  std::size_t dense_size_ = 0;  // of the segments added so far
  std::vector<Segment> segments_;
  std::map<std::string, std::size_t> offset_of_;
  std::vector<std::unique_ptr<MoeLayer<T>>> moe_;
  double sync_seconds_ = 0;
};

}  // namespace skew::moe
