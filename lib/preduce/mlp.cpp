#include "lib/preduce/mlp.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/gemm.hpp"

namespace skew::preduce {

Mlp::Mlp(std::vector<int> widths) : widths_(std::move(widths)) {
  SKEW_CHECK(widths_.size() >= 2,
             "model.layers needs at least inputs and classes, got " << widths_.size() << " widths");
  for (int w : widths_) SKEW_CHECK(w >= 1, "model.layers: every width must be >= 1, got " << w);
  for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
    offsets_.push_back(num_params_);
    num_params_ += static_cast<std::size_t>(widths_[l] + 1) * static_cast<std::size_t>(widths_[l + 1]);
  }
  activations_.resize(widths_.size());
}

std::vector<float> Mlp::init(std::uint64_t seed) const {
  std::vector<float> p(num_params_, 0.0f);
  Rng rng(seed, 0x6d6c70);
  for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
    const float scale = std::sqrt(2.0f / static_cast<float>(widths_[l]));
    const std::size_t n = static_cast<std::size_t>(widths_[l]) * static_cast<std::size_t>(widths_[l + 1]);
    for (std::size_t i = 0; i < n; ++i) p[weight_offset(l) + i] = scale * rng.normal();
  }
  return p;
}

void Mlp::forward(const std::vector<float>& params, const float* x, int batch) {
  SKEW_CHECK(params.size() == num_params_, "model has " << num_params_ << " parameters, got " << params.size());
  const float* in = x;
  for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    auto& out = activations_[l + 1];
    out.resize(static_cast<std::size_t>(batch) * static_cast<std::size_t>(n_out));
    const float* bias = params.data() + bias_offset(l);
    for (int r = 0; r < batch; ++r) std::copy(bias, bias + n_out, out.data() + static_cast<std::size_t>(r) * n_out);
    kernels::GemmShape shape;
    shape.m = batch;
    shape.n = n_out;
    shape.k = n_in;
    kernels::gemm(Device::Host, shape, 1.0f, in, params.data() + weight_offset(l), 1.0f, out.data());
    if (l + 2 < widths_.size())
      for (float& v : out) v = std::max(v, 0.0f);
    in = out.data();
  }
}

namespace {
// Softmax of one row of logits in place; returns -log p[label].
double softmax_row(float* logits, int classes, int label) {
  const float top = *std::max_element(logits, logits + classes);
  double sum = 0.0;
  for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(logits[c] - top));
  const double log_sum = std::log(sum);
  const double loss = -(static_cast<double>(logits[label] - top) - log_sum);
  for (int c = 0; c < classes; ++c)
    logits[c] = static_cast<float>(std::exp(static_cast<double>(logits[c] - top) - log_sum));
  return loss;
}
}  // namespace

double Mlp::loss(const std::vector<float>& params, const float* x, const int* labels, int batch) {
  forward(params, x, batch);
  auto& logits = activations_.back();
  double total = 0.0;
  for (int r = 0; r < batch; ++r)
    total += softmax_row(logits.data() + static_cast<std::size_t>(r) * classes(), classes(), labels[r]);
  return total / batch;
}

double Mlp::loss_and_grad(const std::vector<float>& params, const float* x, const int* labels, int batch,
                          std::vector<float>& grad) {
  const double mean_loss = loss(params, x, labels, batch);
  grad.assign(num_params_, 0.0f);
  // delta = dLoss/dLogits = (softmax - onehot) / batch
  delta_ = activations_.back();
  for (int r = 0; r < batch; ++r) delta_[static_cast<std::size_t>(r) * classes() + labels[r]] -= 1.0f;
  for (float& d : delta_) d /= static_cast<float>(batch);
  for (std::size_t l = widths_.size() - 1; l-- > 0;) {
    const int n_in = widths_[l], n_out = widths_[l + 1];
    const float* in = l == 0 ? x : activations_[l].data();
    kernels::GemmShape dw;  // dW = in^T delta
    dw.trans_a = true;
    dw.m = n_in;
    dw.n = n_out;
    dw.k = batch;
    dw.lda = n_in;
    kernels::gemm(Device::Host, dw, 1.0f, in, delta_.data(), 0.0f, grad.data() + weight_offset(l));
    float* db = grad.data() + bias_offset(l);
    for (int r = 0; r < batch; ++r)
      for (int c = 0; c < n_out; ++c) db[c] += delta_[static_cast<std::size_t>(r) * n_out + c];
    if (l == 0) break;
    delta_prev_.assign(static_cast<std::size_t>(batch) * n_in, 0.0f);
    kernels::GemmShape dx;  // delta_prev = delta W^T, masked by the ReLU
    dx.trans_b = true;
    dx.m = batch;
    dx.n = n_in;
    dx.k = n_out;
    dx.ldb = n_out;
    kernels::gemm(Device::Host, dx, 1.0f, delta_.data(), params.data() + weight_offset(l), 0.0f, delta_prev_.data());
    const auto& act = activations_[l];
    for (std::size_t i = 0; i < delta_prev_.size(); ++i)
      if (act[i] <= 0.0f) delta_prev_[i] = 0.0f;
    delta_.swap(delta_prev_);
  }
  return mean_loss;
}

double Mlp::accuracy(const std::vector<float>& params, const float* x, const int* labels, int rows) {
  constexpr int kChunk = 512;
  int correct = 0;
  for (int start = 0; start < rows; start += kChunk) {
    const int batch = std::min(kChunk, rows - start);
    forward(params, x + static_cast<std::size_t>(start) * inputs(), batch);
    const auto& logits = activations_.back();
    for (int r = 0; r < batch; ++r) {
      const float* row = logits.data() + static_cast<std::size_t>(r) * classes();
      if (std::max_element(row, row + classes()) - row == labels[start + r]) ++correct;
    }
  }
  return rows > 0 ? static_cast<double>(correct) / rows : 0.0;
}

}  // namespace skew::preduce
