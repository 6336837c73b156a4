// AdamW (decoupled weight decay on matrices, not on gains and biases) with linear warmup and
// cosine decay, and clipping by the global gradient norm. Dense parameters are identical on
// every rank; each expert replica applies the same update from the same (replica-reduced)
// gradient, so replicas stay identical without exchanging parameters. The dense parameters'
// moments live on the network's device and are updated there; the experts' where their layer
// keeps them (MoeOptions::device, the network's device).
#pragma once
#include <cstdint>

#include "lib/moe/models/network.hpp"

namespace skew::moe {

struct AdamWOptions {
  double lr = 3e-3, min_lr_ratio = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.01, grad_clip = 1.0;
  std::int64_t warmup = 10, total = 100;
};

double learning_rate(const AdamWOptions& opt, std::int64_t step);  // step counts from 0

class AdamW {
 public:
  AdamW(const AdamWOptions& opt, MoeNetwork<float>& model, comm::ProcessGroup& world);
  // Clips and applies one update; returns the global gradient norm before clipping.
  double step(std::int64_t iteration);
  DeviceArray<float>& m() { return m_; }
  DeviceArray<float>& v() { return v_; }

 private:
  AdamWOptions opt_;
  MoeNetwork<float>& model_;
  comm::ProcessGroup& world_;
  DeviceArray<float> m_, v_;
  std::vector<char> decay_;  // per dense segment, in segments() order
};

}  // namespace skew::moe
