// One expert's forward and backward over a block of tokens, run as moe_train's MoE layer runs its
// experts (lib/moe/moe_layer_experts.cpp) with the same kernels: forward hpre = x W1 + b1,
// h = GELU(hpre), y = h W2 + b2; backward dh = GELU'(hpre) (dy W2^T), dx = dh W1^T; weight
// gradients dW2 += h^T dy, dW1 += x^T dh, db2 += sum dy, db1 += sum dh. Six GEMMs of three shapes
// plus the elementwise work: what the cost model charges as 6 FLOPs per parameter and token, so
// the start-up calibration (measure_constants) times this rather than one forward GEMM.
// fp32 on the host; on cuda bf16 operands with fp32 accumulation (the weights rounded once, the
// activations once per product, as the float layer runs its bf16 products).
#pragma once
#include <cstdint>
#include <vector>

#include "core/device_array.hpp"

namespace skew::placement {

class ExpertStep {
 public:
  // Normal(0, 1) inputs and weights scaled by 1 / sqrt(fan-in), drawn from `seed` on the host.
  ExpertStep(int rows, int hidden, int ffn, Device device, std::uint64_t seed);
  // One forward and backward; the weight gradients accumulate over calls.
  void run();
  // Waits for the device (a host copy of one output).
  void wait() const;
  int rows() const { return rows_; }

  // Host values, for the tests: inputs x [rows, hidden], W1 [hidden, ffn], b1 [ffn],
  // W2 [ffn, hidden], b2 [hidden], dy [rows, hidden]; outputs y, dx [rows, hidden] and the
  // gradients dW1, db1, dW2, db2.
  struct Values {
    std::vector<float> x, w1, b1, w2, b2, dy, y, dx, dw1, db1, dw2, db2;
  };
  Values values() const;

 private:
  // c = a op(w) + beta c over all rows; w is [k, n], or [n, k] when trans_b.
  void rows_gemm(const DeviceArray<float>& w, const DeviceArray<std::uint16_t>& w_bf16, bool trans_b, int n, int k,
                 const DeviceArray<float>& a, float beta, DeviceArray<float>& c);
  void weight_gemm(int m, int n, const DeviceArray<float>& a, const DeviceArray<float>& b, DeviceArray<float>& grad);

  int rows_, hidden_, ffn_;
  Device device_;
  bool bf16_;
  DeviceArray<float> x_, w1_, b1_, w2_, b2_, dy_;
  DeviceArray<float> hpre_, h_, y_, dh_, dx_, dw1_, db1_, dw2_, db2_;
  DeviceArray<std::uint16_t> w1_bf16_, w2_bf16_, activation_bf16_;  // bf16 bits (cuda)
};

}  // namespace skew::placement
