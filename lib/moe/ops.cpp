#include "lib/moe/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_rowwise.hpp"
#include "lib/moe/ops_internal.hpp"

namespace skew::moe {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  SKEW_THROW("unknown precision '" << name << "' (fp32 or bf16)");
}

template <>
void matmul<float>(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                   float* c, Precision precision, Device device) {
  kernels::GemmShape s;
  s.trans_a = ta, s.trans_b = tb, s.m = m, s.n = n, s.k = k;
  if (precision == Precision::Bf16)
    kernels::gemm_bf16(device, s, alpha, a, b, beta, c);
  else
    kernels::gemm(device, s, alpha, a, b, beta, c);
}

template <>
void matmul<double>(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta,
                    double* c, Precision precision, Device device) {
  require_host_reference(device, "matmul");
  const int lda = ta ? m : k, ldb = tb ? k : n;
  // Bf16: the products of the operands as bf16 carries them (each rounded once, as fp32 first).
  std::vector<double> a_rounded, b_rounded;
  if (precision == Precision::Bf16) {
    auto rounded = [](const double* x, std::size_t count) {
      std::vector<double> out(count);
      for (std::size_t i = 0; i < count; ++i) out[i] = round_to_bf16(static_cast<float>(x[i]));
      return out;
    };
    a_rounded = rounded(a, static_cast<std::size_t>(m) * k);
    b_rounded = rounded(b, static_cast<std::size_t>(k) * n);
    a = a_rounded.data(), b = b_rounded.data();
  }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p)
        acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * n + j] = alpha * acc + (beta == 0 ? 0.0 : beta * c[i * n + j]);
    }
}

template <class T>
void linear_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y, Precision precision,
                    Device device) {
  require_host_reference(device, "linear_forward");
  for (int i = 0; i < n; ++i) std::copy(b, b + out, y + static_cast<std::size_t>(i) * out);
  matmul<T>(false, false, n, out, in, T(1), x, w, T(1), y, precision);
}

template <class T>
void linear_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                     Precision precision, Device device) {
  require_host_reference(device, "linear_backward");
  if (dx) matmul<T>(false, true, n, in, out, T(1), dy, w, T(0), dx, precision);
  matmul<T>(true, false, in, out, n, T(1), x, dy, T(1), dw, precision);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) db[j] += dy[static_cast<std::size_t>(i) * out + j];
}

// The float paths: the bias broadcast into y first and the GEMM adding x w onto it (beta = 1),
// and the bias gradient summed row by row, as the float64 references above do it.
template <>
void linear_forward<float>(int n, int in, int out, const float* x, const float* w, const float* b, float* y,
                           Precision precision, Device device) {
  kernels::moe::broadcast_row(device, static_cast<std::size_t>(n), static_cast<std::size_t>(out), b, y);
  matmul<float>(false, false, n, out, in, 1.0f, x, w, 1.0f, y, precision, device);
}

template <>
void linear_backward<float>(int n, int in, int out, const float* x, const float* w, const float* dy, float* dx,
                            float* dw, float* db, Precision precision, Device device) {
  if (dx) matmul<float>(false, true, n, in, out, 1.0f, dy, w, 0.0f, dx, precision, device);
  matmul<float>(true, false, in, out, n, 1.0f, x, dy, 1.0f, dw, precision, device);
  kernels::moe::column_sum_add(device, static_cast<std::size_t>(n), static_cast<std::size_t>(out), dy, db);
}

template <class T>
void layernorm_forward(int n, int d, const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, Device device) {
  require_host_reference(device, "layernorm_forward");
  for (int i = 0; i < n; ++i) {
    const T* xi = x + static_cast<std::size_t>(i) * d;
    T* yi = y + static_cast<std::size_t>(i) * d;
    double mu = 0, var = 0;
    for (int j = 0; j < d; ++j) mu += xi[j];
    mu /= d;
    for (int j = 0; j < d; ++j) var += (xi[j] - mu) * (xi[j] - mu);
    var /= d;
    const double rs = 1.0 / std::sqrt(var + 1e-5);
    mean[i] = static_cast<T>(mu);
    rstd[i] = static_cast<T>(rs);
    for (int j = 0; j < d; ++j) yi[j] = static_cast<T>((xi[j] - mu) * rs) * g[j] + b[j];
  }
}

template <class T>
void layernorm_backward(int n, int d, const T* x, const T* g, const T* mean, const T* rstd, const T* dy, T* dx, T* dg,
                        T* db, Device device) {
  require_host_reference(device, "layernorm_backward");
  for (int i = 0; i < n; ++i) {
    const T* xi = x + static_cast<std::size_t>(i) * d;
    const T* dyi = dy + static_cast<std::size_t>(i) * d;
    T* dxi = dx + static_cast<std::size_t>(i) * d;
    double sum_dn = 0, sum_dn_n = 0;  // over j of dnorm and dnorm * norm
    for (int j = 0; j < d; ++j) {
      const double nrm = (xi[j] - mean[i]) * rstd[i];
      const double dn = dyi[j] * g[j];
      sum_dn += dn;
      sum_dn_n += dn * nrm;
      dg[j] += static_cast<T>(dyi[j] * nrm);
      db[j] += dyi[j];
    }
    for (int j = 0; j < d; ++j) {
      const double nrm = (xi[j] - mean[i]) * rstd[i];
      dxi[j] = static_cast<T>(rstd[i] * (dyi[j] * g[j] - sum_dn / d - nrm * sum_dn_n / d));
    }
  }
}

// The float paths below are the CPU twins of the CUDA kernels (kernels/moe_rowwise.hpp: one row
// body for both, the same arithmetic as the float code they replace, so training is unchanged
// bit for bit); the templates above are the float64 references the tests use.
template <>
void layernorm_forward<float>(int n, int d, const float* x, const float* g, const float* b, float* y, float* mean,
                              float* rstd, Device device) {
  kernels::moe::layernorm_forward(device, n, d, x, g, b, y, mean, rstd);
}

template <>
void layernorm_backward<float>(int n, int d, const float* x, const float* g, const float* mean, const float* rstd,
                               const float* dy, float* dx, float* dg, float* db, Device device) {
  kernels::moe::layernorm_backward(device, n, d, x, g, mean, rstd, dy, dx, dg, db);
}

template <class T>
void embedding_forward(int n, int d, int seq, const std::int32_t* tokens, const T* wte, const T* wpe, T* out,
                       Device device) {
  require_host_reference(device, "embedding_forward");
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c)
      out[static_cast<std::size_t>(t) * d + c] =
          wte[static_cast<std::size_t>(tokens[t]) * d + c] + wpe[static_cast<std::size_t>(t % seq) * d + c];
}

template <>
void embedding_forward<float>(int n, int d, int seq, const std::int32_t* tokens, const float* wte, const float* wpe,
                              float* out, Device device) {
  kernels::moe::embedding_forward(device, n, d, seq, tokens, wte, wpe, out);
}

template <class T>
void embedding_backward(int n, int d, int seq, const std::int32_t* tokens, const T* dout, T* dwte, T* dwpe,
                        Device device) {
  require_host_reference(device, "embedding_backward");
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) {
      dwte[static_cast<std::size_t>(tokens[t]) * d + c] += dout[static_cast<std::size_t>(t) * d + c];
      dwpe[static_cast<std::size_t>(t % seq) * d + c] += dout[static_cast<std::size_t>(t) * d + c];
    }
}

template <>
void embedding_backward<float>(int n, int d, int seq, const std::int32_t* tokens, const float* dout, float* dwte,
                               float* dwpe, Device device) {
  kernels::moe::embedding_backward(device, n, d, seq, tokens, dout, dwte, dwpe);
}

template <class T>
double sum_of_squares(std::size_t n, const T* x, Device device) {
  require_host_reference(device, "sum_of_squares");
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

template <>
double sum_of_squares<float>(std::size_t n, const float* x, Device device) {
  return kernels::moe::sum_of_squares(device, n, x);
}

template <class T>
void add_inplace(std::size_t n, T* x, const T* y, Device device) {
  require_host_reference(device, "add_inplace");
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

template <>
void add_inplace<float>(std::size_t n, float* x, const float* y, Device device) {
  kernels::moe::add_inplace(device, n, x, y);
}

namespace {
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
}  // namespace

template <class T>
void gelu_forward(std::size_t n, const T* x, T* y, Device device) {
  require_host_reference(device, "gelu_forward");
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<T>(0.5 * v * (1 + std::tanh(kGeluC * (v + 0.044715 * v * v * v))));
  }
}

// The float path is the CPU twin of the CUDA kernel: one per-element body for both
// (kernels/moe_elementwise.hpp), vectorised there.
template <>
void gelu_forward<float>(std::size_t n, const float* x, float* y, Device device) {
  kernels::moe::gelu_forward(device, n, x, y);
}

template <class T>
void gelu_backward(std::size_t n, const T* x, const T* dy, T* dx, Device device) {
  require_host_reference(device, "gelu_backward");
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u = kGeluC * (v + 0.044715 * v * v * v);
    const double t = std::tanh(u);
    const double du = kGeluC * (1 + 3 * 0.044715 * v * v);
    dx[i] = static_cast<T>(dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du));
  }
}

template <>
void gelu_backward<float>(std::size_t n, const float* x, const float* dy, float* dx, Device device) {
  kernels::moe::gelu_backward(device, n, x, dy, dx);
}

template <class T>
double cross_entropy(int n, int v, const T* logits, const std::int32_t* targets, T scale, T* dlogits, Device device) {
  require_host_reference(device, "cross_entropy");
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const T* l = logits + static_cast<std::size_t>(i) * v;
    T* dl = dlogits + static_cast<std::size_t>(i) * v;
    const T mx = *std::max_element(l, l + v);
    for (int j = 0; j < v; ++j) dl[j] = std::exp(l[j] - mx);
    double z = 0;
    for (int j = 0; j < v; ++j) z += dl[j];
    total += mx + std::log(z) - l[targets[i]];
    const T factor = static_cast<T>(scale / z);
    for (int j = 0; j < v; ++j) dl[j] *= factor;
    dl[targets[i]] -= scale;
  }
  return total * static_cast<double>(scale);
}

template <>
double cross_entropy<float>(int n, int v, const float* logits, const std::int32_t* targets, float scale, float* dlogits,
                            Device device) {
  std::vector<double> row_loss(static_cast<std::size_t>(n));
  if (device == Device::Host) {
    kernels::moe::cross_entropy(Device::Host, n, v, logits, targets, scale, dlogits, row_loss.data());
  } else {
    thread_local Tensor device_row_loss;
    kernels::moe::cross_entropy(device, n, v, logits, targets, scale, dlogits,
                                scratch_of(device_row_loss, row_loss.size(), DType::F64, device).data<double>());
    const Tensor on_host = device_row_loss.to(Device::Host);
    std::copy(on_host.data<double>(), on_host.data<double>() + n, row_loss.begin());
  }
  double total = 0;  // summed in row order on the host, as the CPU path always did
  for (double loss : row_loss) total += loss;
  return total * static_cast<double>(scale);
}

// The float64 references; every float path is an explicit specialisation above (attention's in
// ops_attention.cpp).
template void linear_forward<double>(int, int, int, const double*, const double*, const double*, double*, Precision,
                                     Device);
template void linear_backward<double>(int, int, int, const double*, const double*, const double*, double*, double*,
                                      double*, Precision, Device);
template void layernorm_forward<double>(int, int, const double*, const double*, const double*, double*, double*,
                                        double*, Device);
template void layernorm_backward<double>(int, int, const double*, const double*, const double*, const double*,
                                         const double*, double*, double*, double*, Device);
template void gelu_forward<double>(std::size_t, const double*, double*, Device);
template void gelu_backward<double>(std::size_t, const double*, const double*, double*, Device);
template double cross_entropy<double>(int, int, const double*, const std::int32_t*, double, double*, Device);
template void embedding_forward<double>(int, int, int, const std::int32_t*, const double*, const double*, double*,
                                        Device);
template void embedding_backward<double>(int, int, int, const std::int32_t*, const double*, double*, double*, Device);
template double sum_of_squares<double>(std::size_t, const double*, Device);
template void add_inplace<double>(std::size_t, double*, const double*, Device);

}  // namespace skew::moe
