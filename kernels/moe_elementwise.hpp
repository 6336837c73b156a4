// Elementwise ops of the GPT-MoE step with one per-element body for the host and the device
// (SKEW_HD): GELU forward and backward, the AdamW update, and the pieces around the dense GEMMs
// (bias broadcast, bias-gradient column sum, residual add). The CPU twins run these bodies in
// loops that GCC vectorises (target_clones: AVX-512, AVX2, baseline); the CUDA kernels run them
// one element per thread. moe_train's CPU path (lib/moe/ops.cpp, optimizer.cpp) calls the CPU
// twins, so the GPU computes what the trained and tested CPU code computes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

// e^x in float for |x| <= 80 (clamped beyond: enough for GELU's sigmoid form to saturate),
// relative error about 2e-7, without libm calls or branches so that loops over it vectorise (the
// double libm tanh was half of a CPU training step):
// e^x = 2^n p(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two, Cody-Waite), p the
// degree-6 Taylor polynomial on |r| <= ln 2 / 2.
SKEW_HD inline float exp_float(float x) {
  x = x < -80.0f ? -80.0f : x > 80.0f ? 80.0f : x;
  // A NaN (a diverged model) must come out NaN, and must not reach the int conversion, where
  // it is undefined behaviour: the exponent is taken from 0 instead, and r carries the NaN.
  const float finite = x == x ? x : 0.0f;
  // + 128.5 keeps the argument positive, so truncation is round-to-nearest.
  const int n = static_cast<int>(finite * 1.44269504f + 128.5f) - 128;
  const float nf = static_cast<float>(n);
  const float r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const std::int32_t bits = (n + 127) << 23;
#if defined(__CUDA_ARCH__)
  return p * __int_as_float(bits);
#else
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
#endif
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

// GELU, tanh approximation (GPT-2): 0.5 v (1 + tanh u) = v e / (e + 1) with e = exp(2u), which has
// no cancellation where tanh u is near -1.
SKEW_HD inline float gelu_forward_element(float v) {
  const float e = exp_float(2.0f * kGeluC * (v + 0.044715f * v * v * v));
  return v * (e / (e + 1.0f));
}

// dy * gelu'(v). With e = exp(2u) and s = 1 / (e + 1): 0.5 (1 + tanh u) = e s and
// 1 - tanh^2 u = 4 e s^2.
SKEW_HD inline float gelu_backward_element(float v, float dy) {
  const float e = exp_float(2.0f * kGeluC * (v + 0.044715f * v * v * v));
  const float s = 1.0f / (e + 1.0f);
  const float du = kGeluC * (1.0f + 3 * 0.044715f * v * v);
  const float sigmoid = e * s;  // first, so that no product overflows for large |v|
  return dy * (sigmoid + 2.0f * sigmoid * s * v * du);
}

// One AdamW step's constants, in fp32 as PyTorch's AdamW: the gradient scale (clipping and
// normalisation), the learning rate, the moment decays, epsilon, weight decay, and the bias
// corrections 1 / (1 - beta1^t) and 1 / sqrt(1 - beta2^t).
struct AdamWStep {
  float scale, lr, beta1, beta2, eps, decay, inv_c1, inv_sqrt_c2;
};

SKEW_HD inline void adamw_element(float& w, float g, float& m, float& v, const AdamWStep& k, float weight_decay) {
  const float gi = g * k.scale;
  m = k.beta1 * m + (1.0f - k.beta1) * gi;
  v = k.beta2 * v + (1.0f - k.beta2) * gi * gi;
#if defined(__CUDA_ARCH__)
  const float root = sqrtf(v);
#else
  const float root = __builtin_sqrtf(v);
#endif
  const float update = (m * k.inv_c1) / (root * k.inv_sqrt_c2 + k.eps) + weight_decay * w;
  w -= k.lr * update;
}

// Element `at` of y[rows, cols] set to its column's entry of `row` (a bias): linear_forward
// broadcasts the bias into y and lets the GEMM add x w onto it (beta = 1), the order the CPU
// path has always summed in.
SKEW_HD inline void broadcast_row_element(std::size_t at, std::size_t cols, const float* row, float* y) {
  y[at] = row[at % cols];
}

// Column j of m[rows, cols] over rows [row_begin, row_end), added in row order onto *sum (the
// bias gradient db += colsum(dy)). The CPU twin calls it one row at a time in row-major order,
// which reads memory in order and sums each column as the plain loop did; the GPU sums chunks
// of rows and then the chunks' partials.
SKEW_HD inline void column_sum_add(std::size_t row_begin, std::size_t row_end, std::size_t cols, std::size_t j,
                                   const float* m, float* sum) {
  float acc = *sum;
  for (std::size_t i = row_begin; i < row_end; ++i) acc += m[i * cols + j];
  *sum = acc;
}

// x[i] += y[i]: a residual connection.
SKEW_HD inline void add_element(std::size_t i, float* x, const float* y) {
  x[i] += y[i];
}

// y = gelu(x), dx = dy * gelu'(x) over n elements on `device`.
void gelu_forward(Device device, std::size_t n, const float* x, float* y);
void gelu_backward(Device device, std::size_t n, const float* x, const float* dy, float* dx);
// y[rows, cols] = the row `row` repeated; sum[cols] += the column sums of m[rows, cols].
void broadcast_row(Device device, std::size_t rows, std::size_t cols, const float* row, float* y);
void column_sum_add(Device device, std::size_t rows, std::size_t cols, const float* m, float* sum);
// x += y over n elements (the residual connections).
void add_inplace(Device device, std::size_t n, float* x, const float* y);
// AdamW on elements [begin, end) of w, g, m, v; weight decay only where `decay`.
void adamw_update(Device device, float* w, const float* g, float* m, float* v, std::size_t begin, std::size_t end,
                  bool decay, const AdamWStep& k);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void broadcast_row(std::size_t rows, std::size_t cols, const float* row, float* y);
void column_sum_add(std::size_t rows, std::size_t cols, const float* m, float* sum);
void add_inplace(std::size_t n, float* x, const float* y);
void gelu_forward(std::size_t n, const float* x, float* y);
void gelu_backward(std::size_t n, const float* x, const float* dy, float* dx);
void adamw_update(float* w, const float* g, float* m, float* v, std::size_t count, bool decay, const AdamWStep& k);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
