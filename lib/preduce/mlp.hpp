// A multilayer perceptron classifier on flat parameter vectors, so that partial-reduce can
// average whole models with one buffer. Layers: affine -> ReLU ... affine -> softmax
// cross-entropy. widths = {inputs, hidden..., classes}; {inputs, classes} is multinomial
// logistic regression (convex), used by the convergence tests. Matmuls go through
// kernels::gemm on the host. Parameter layout: W0 (in x out, row-major), b0, W1, b1, ...
#pragma once
#include <cstdint>
#include <vector>

namespace skew::preduce {

class Mlp {
 public:
  explicit Mlp(std::vector<int> widths);
  std::size_t num_params() const { return num_params_; }
  int inputs() const { return widths_.front(); }
  int classes() const { return widths_.back(); }
  const std::vector<int>& widths() const { return widths_; }

  // He-normal weights from (seed), zero biases.
  std::vector<float> init(std::uint64_t seed) const;
  // Mean cross-entropy over the batch; grad (resized to num_params) gets its gradient.
  double loss_and_grad(const std::vector<float>& params, const float* x, const int* labels, int batch,
                       std::vector<float>& grad);
  // Mean cross-entropy without gradient (tests: finite differences).
  double loss(const std::vector<float>& params, const float* x, const int* labels, int batch);
  // Fraction of rows whose arg-max logit equals the label.
  double accuracy(const std::vector<float>& params, const float* x, const int* labels, int rows);

 private:
  void forward(const std::vector<float>& params, const float* x, int batch);
  std::size_t weight_offset(std::size_t layer) const { return offsets_[layer]; }
  std::size_t bias_offset(std::size_t layer) const {
    return offsets_[layer] + static_cast<std::size_t>(widths_[layer]) * static_cast<std::size_t>(widths_[layer + 1]);
  }

  std::vector<int> widths_;
  std::vector<std::size_t> offsets_;
  std::size_t num_params_ = 0;
  std::vector<std::vector<float>> activations_;  // activations_[l]: batch x widths_[l] (l >= 1)
  std::vector<float> delta_, delta_prev_;
};

}  // namespace skew::preduce
