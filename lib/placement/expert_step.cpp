#include "lib/placement/expert_step.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_expert.hpp"

namespace skew::placement {

namespace km = kernels::moe;

namespace {

DeviceArray<float> normal_array(Rng& rng, std::size_t n, double scale, Device device) {
  std::vector<float> host(n);
  for (auto& v : host) v = static_cast<float>(scale * rng.normal());
  DeviceArray<float> out(device);
  out.resize(n);
  out.upload(host.data(), n);
  return out;
}

DeviceArray<float> zero_array(std::size_t n, Device device) {
  DeviceArray<float> out(device);
  out.resize(n);
  return out;
}

}  // namespace

ExpertStep::ExpertStep(int rows, int hidden, int ffn, Device device, std::uint64_t seed)
    : rows_(rows), hidden_(hidden), ffn_(ffn), device_(device), bf16_(device == Device::Cuda) {
  SKEW_CHECK(rows > 0 && hidden > 0 && ffn > 0,
             "expert step of " << rows << " rows, hidden " << hidden << ", ffn " << ffn << ": all must be positive");
  const auto R = static_cast<std::size_t>(rows), D = static_cast<std::size_t>(hidden),
             F = static_cast<std::size_t>(ffn);
  Rng rng(seed, 0, 0);
  x_ = normal_array(rng, R * D, 1.0, device);
  w1_ = normal_array(rng, D * F, 1.0 / std::sqrt(static_cast<double>(D)), device);
  b1_ = normal_array(rng, F, 0.1, device);
  w2_ = normal_array(rng, F * D, 1.0 / std::sqrt(static_cast<double>(F)), device);
  b2_ = normal_array(rng, D, 0.1, device);
  dy_ = normal_array(rng, R * D, 1.0, device);
  for (auto* a : {&hpre_, &h_, &dh_}) *a = zero_array(R * F, device);
  for (auto* a : {&y_, &dx_}) *a = zero_array(R * D, device);
  dw1_ = zero_array(D * F, device), dw2_ = zero_array(F * D, device);
  db1_ = zero_array(F, device), db2_ = zero_array(D, device);
  if (bf16_) {
    for (auto* a : {&w1_bf16_, &w2_bf16_, &activation_bf16_}) a->set_device(device);
    w1_bf16_.resize(D * F), w2_bf16_.resize(F * D), activation_bf16_.resize(R * F);
    km::to_bf16_bits(device, w1_.data(), static_cast<std::int64_t>(D * F), w1_bf16_.data());
    km::to_bf16_bits(device, w2_.data(), static_cast<std::int64_t>(F * D), w2_bf16_.data());
  }
}

void ExpertStep::rows_gemm(const DeviceArray<float>& w, const DeviceArray<std::uint16_t>& w_bf16, bool trans_b, int n,
                           int k, const DeviceArray<float>& a, float beta, DeviceArray<float>& c) {
  const std::int64_t offsets[2] = {0, rows_};
  if (bf16_) {
    const std::uint16_t* weights[1] = {w_bf16.data()};
    km::to_bf16_bits(device_, a.data(), static_cast<std::int64_t>(rows_) * k, activation_bf16_.data());
    km::grouped_gemm_bf16_operands(device_, 1, offsets, trans_b, n, k, activation_bf16_.data(), weights, beta,
                                   c.data());
  } else {
    const float* weights[1] = {w.data()};
    km::grouped_gemm(device_, 1, offsets, trans_b, n, k, a.data(), weights, beta, c.data());
  }
}

void ExpertStep::weight_gemm(int m, int n, const DeviceArray<float>& a, const DeviceArray<float>& b,
                             DeviceArray<float>& grad) {
  const std::int64_t offsets[2] = {0, rows_};
  float* grads[1] = {grad.data()};
  km::grouped_gemm_weight_grads(device_, bf16_, 1, offsets, m, n, a.data(), b.data(), grads);
}

void ExpertStep::run() {
  const auto R = static_cast<std::size_t>(rows_), D = static_cast<std::size_t>(hidden_),
             F = static_cast<std::size_t>(ffn_);
  // Forward: the biases first, the products accumulate onto them.
  km::broadcast_row(device_, R, F, b1_.data(), hpre_.data());
  km::broadcast_row(device_, R, D, b2_.data(), y_.data());
  rows_gemm(w1_, w1_bf16_, false, ffn_, hidden_, x_, 1.0f, hpre_);
  km::gelu_forward(device_, R * F, hpre_.data(), h_.data());
  rows_gemm(w2_, w2_bf16_, false, hidden_, ffn_, h_, 1.0f, y_);
  // Backward through the rows, then the weight gradients.
  rows_gemm(w2_, w2_bf16_, true, ffn_, hidden_, dy_, 0.0f, dh_);
  km::gelu_backward(device_, R * F, hpre_.data(), dh_.data(), dh_.data());
  rows_gemm(w1_, w1_bf16_, true, hidden_, ffn_, dh_, 0.0f, dx_);
  weight_gemm(ffn_, hidden_, h_, dy_, dw2_);
  weight_gemm(hidden_, ffn_, x_, dh_, dw1_);
  km::column_sum_add(device_, R, D, dy_.data(), db2_.data());
  km::column_sum_add(device_, R, F, dh_.data(), db1_.data());
}

void ExpertStep::wait() const {
  (void)db1_.host_copy();
}

ExpertStep::Values ExpertStep::values() const {
  return {x_.host_copy(), w1_.host_copy(), b1_.host_copy(),  w2_.host_copy(),  b2_.host_copy(),  dy_.host_copy(),
          y_.host_copy(), dx_.host_copy(), dw1_.host_copy(), db1_.host_copy(), dw2_.host_copy(), db2_.host_copy()};
}

}  // namespace skew::placement
