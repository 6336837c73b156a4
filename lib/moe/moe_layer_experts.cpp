// The local experts' FFNs over expert-contiguous rows, every expert of a call in one grouped GEMM
// per matrix product (kernels/moe_expert.hpp): forward x W1, h W2; backward dy W2^T, dhpre W1^T;
// weight gradients x^T dhpre, h^T dy per expert. Bias and GELU run on the elementwise kernels. The
// float layer's bf16 products read weight copies rounded once per weight change (bf16_weights_),
// not once per GEMM; the float64 layer is the host reference and loops matmul per expert.
#include <algorithm>
#include <type_traits>

#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_expert.hpp"
#include "lib/moe/moe_layer.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

namespace km = kernels::moe;

namespace {

template <class T>
void broadcast_bias(Device device, std::int64_t rows, int cols, const T* bias, T* y) {
  if constexpr (std::is_same_v<T, float>) {
    km::broadcast_row(device, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), bias, y);
  } else {
    for (std::int64_t i = 0; i < rows; ++i) std::copy(bias, bias + cols, y + i * cols);
  }
}

template <class T>
void add_bias_grad(Device device, std::int64_t rows, int cols, const T* dy, T* dbias) {
  if constexpr (std::is_same_v<T, float>) {
    km::column_sum_add(device, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), dy, dbias);
  } else {
    for (std::int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) dbias[j] += dy[i * cols + j];
  }
}

}  // namespace

template <class T>
void MoeLayer<T>::weights_changed() {
  bf16_stale_ = true;
}

template <class T>
void MoeLayer<T>::round_expert_weights() {
  if constexpr (std::is_same_v<T, float>) {
    if (opt_.precision != Precision::Bf16) return;
    const std::size_t matrix = static_cast<std::size_t>(opt_.d_model) * opt_.d_ff;
    for (int e : local_experts_) {
      if (!bf16_stale_ && bf16_weights_.count(e)) continue;
      DeviceArray<std::uint16_t>& copy = bf16_weights_[e];
      copy.set_device(opt_.device);
      copy.resize(2 * matrix);
      const float* w = params_of(e);
      km::to_bf16_bits(opt_.device, w, static_cast<std::int64_t>(matrix), copy.data());
      km::to_bf16_bits(opt_.device, w + matrix + opt_.d_ff, static_cast<std::int64_t>(matrix), copy.data() + matrix);
    }
    bf16_stale_ = false;
  }
}

template <class T>
void MoeLayer<T>::experts_gemm(const ExpertGroups& groups, int matrix, bool trans_b, int n, int k, const T* a, T beta,
                               T* c) {
  const std::size_t D = static_cast<std::size_t>(opt_.d_model), F = static_cast<std::size_t>(opt_.d_ff);
  const std::size_t offset = matrix == 0 ? 0 : D * F + F;  // W1 or W2 in [W1 | b1 | W2 | b2]
  const auto count = static_cast<int>(groups.experts.size());
  const std::int64_t* offsets = groups.offsets.data();
  if constexpr (std::is_same_v<T, float>) {
    if (opt_.precision == Precision::Bf16) {
      std::vector<const std::uint16_t*> w16;
      for (int e : groups.experts) w16.push_back(bf16_weights_.at(e).data() + (matrix == 0 ? 0 : D * F));
      activation_bf16_.resize(static_cast<std::size_t>(offsets[count]) * static_cast<std::size_t>(k));
      km::to_bf16_bits(opt_.device, a, offsets[count] * k, activation_bf16_.data());
      km::grouped_gemm_bf16_operands(opt_.device, count, offsets, trans_b, n, k, activation_bf16_.data(), w16.data(),
                                     beta, c);
    } else {
      std::vector<const float*> w;
      for (int e : groups.experts) w.push_back(params_of(e) + offset);
      km::grouped_gemm(opt_.device, count, offsets, trans_b, n, k, a, w.data(), beta, c);
    }
  } else {
    for (int g = 0; g < count; ++g)
      matmul<T>(false, trans_b, static_cast<int>(offsets[g + 1] - offsets[g]), n, k, T(1), a + offsets[g] * k,
                params_of(groups.experts[static_cast<std::size_t>(g)]) + offset, beta, c + offsets[g] * n,
                opt_.precision);
  }
}

template <class T>
void MoeLayer<T>::experts_weight_gemm(const ExpertGroups& groups, int matrix, int m, int n, const T* a, const T* b) {
  const std::size_t D = static_cast<std::size_t>(opt_.d_model), F = static_cast<std::size_t>(opt_.d_ff);
  const std::size_t offset = matrix == 0 ? 0 : D * F + F;
  const auto count = static_cast<int>(groups.experts.size());
  const std::int64_t* offsets = groups.offsets.data();
  std::vector<T*> grads;
  for (int e : groups.experts) grads.push_back(grads_of(e) + offset);
  if constexpr (std::is_same_v<T, float>) {
    km::grouped_gemm_weight_grads(opt_.device, opt_.precision == Precision::Bf16, count, offsets, m, n, a, b,
                                  grads.data());
  } else {
    for (int g = 0; g < count; ++g)
      matmul<T>(true, false, m, n, static_cast<int>(offsets[g + 1] - offsets[g]), T(1), a + offsets[g] * m,
                b + offsets[g] * n, T(1), grads[static_cast<std::size_t>(g)], opt_.precision);
  }
}

template <class T>
void MoeLayer<T>::experts_forward(const ExpertGroups& groups, const T* x, T* hpre, T* h, T* y) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const std::size_t b2 = 2 * static_cast<std::size_t>(D) * F + F;
  const std::int64_t rows = groups.offsets.back();
  for (std::size_t g = 0; g < groups.experts.size(); ++g) {
    const std::int64_t o = groups.offsets[g], count = groups.offsets[g + 1] - o;
    broadcast_bias<T>(opt_.device, count, F, params_of(groups.experts[g]) + static_cast<std::size_t>(D) * F,
                      hpre + o * F);
    broadcast_bias<T>(opt_.device, count, D, params_of(groups.experts[g]) + b2, y + o * D);
  }
  experts_gemm(groups, 0, false, F, D, x, T(1), hpre);
  gelu_forward<T>(static_cast<std::size_t>(rows) * F, hpre, h, opt_.device);
  experts_gemm(groups, 1, false, D, F, h, T(1), y);
}

template <class T>
void MoeLayer<T>::experts_backward_rows(const ExpertGroups& groups, const T* hpre, const T* dy, T* dhpre, T* dx) {
  const int D = opt_.d_model, F = opt_.d_ff;
  experts_gemm(groups, 1, true, F, D, dy, T(0), dhpre);
  gelu_backward<T>(static_cast<std::size_t>(groups.offsets.back()) * F, hpre, dhpre, dhpre, opt_.device);
  experts_gemm(groups, 0, true, D, F, dhpre, T(0), dx);
}

template <class T>
void MoeLayer<T>::experts_weight_grads(const ExpertGroups& groups, const T* x, const T* h, const T* dy,
                                       const T* dhpre) {
  const int D = opt_.d_model, F = opt_.d_ff;
  const std::size_t b1 = static_cast<std::size_t>(D) * F, b2 = 2 * b1 + F;
  experts_weight_gemm(groups, 1, F, D, h, dy);
  experts_weight_gemm(groups, 0, D, F, x, dhpre);
  for (std::size_t g = 0; g < groups.experts.size(); ++g) {
    const std::int64_t o = groups.offsets[g], count = groups.offsets[g + 1] - o;
    T* grads = grads_of(groups.experts[g]);
    add_bias_grad<T>(opt_.device, count, D, dy + o * D, grads + b2);
    add_bias_grad<T>(opt_.device, count, F, dhpre + o * F, grads + b1);
  }
}

#define SKEW_EXPERT_MEMBERS(T)                                                                       \
  template void MoeLayer<T>::weights_changed();                                                      \
  template void MoeLayer<T>::round_expert_weights();                                                 \
  template void MoeLayer<T>::experts_forward(const ExpertGroups&, const T*, T*, T*, T*);             \
  template void MoeLayer<T>::experts_backward_rows(const ExpertGroups&, const T*, const T*, T*, T*); \
  template void MoeLayer<T>::experts_weight_grads(const ExpertGroups&, const T*, const T*, const T*, const T*);
SKEW_EXPERT_MEMBERS(float)
SKEW_EXPERT_MEMBERS(double)

}  // namespace skew::moe
