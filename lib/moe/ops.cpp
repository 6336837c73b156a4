#include "lib/moe/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/gemm.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_rowwise.hpp"
#include "lib/core/error.hpp"

namespace skew::moe {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "bf16") return Precision::Bf16;
  SKEW_THROW("unknown precision '" << name << "' (fp32 or bf16)");
}

template <>
void matmul<float>(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                   float* c, Precision precision) {
  kernels::GemmShape s;
  s.trans_a = ta, s.trans_b = tb, s.m = m, s.n = n, s.k = k;
  if (precision == Precision::Bf16)
    kernels::gemm_bf16(Device::Host, s, alpha, a, b, beta, c);
  else
    kernels::gemm(Device::Host, s, alpha, a, b, beta, c);
}

template <>
void matmul<double>(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta,
                    double* c, Precision precision) {
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
void linear_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y, Precision precision) {
  for (int i = 0; i < n; ++i) std::copy(b, b + out, y + static_cast<std::size_t>(i) * out);
  matmul<T>(false, false, n, out, in, T(1), x, w, T(1), y, precision);
}

template <class T>
void linear_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                     Precision precision) {
  if (dx) matmul<T>(false, true, n, in, out, T(1), dy, w, T(0), dx, precision);
  matmul<T>(true, false, in, out, n, T(1), x, dy, T(1), dw, precision);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) db[j] += dy[static_cast<std::size_t>(i) * out + j];
}

template <class T>
void layernorm_forward(int n, int d, const T* x, const T* g, const T* b, T* y, T* mean, T* rstd) {
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
                        T* db) {
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
                              float* rstd) {
  kernels::moe::layernorm_forward(Device::Host, n, d, x, g, b, y, mean, rstd);
}

template <>
void layernorm_backward<float>(int n, int d, const float* x, const float* g, const float* mean, const float* rstd,
                               const float* dy, float* dx, float* dg, float* db) {
  kernels::moe::layernorm_backward(Device::Host, n, d, x, g, mean, rstd, dy, dx, dg, db);
}

template <class T>
void embedding_forward(int n, int d, int seq, const std::int32_t* tokens, const T* wte, const T* wpe, T* out) {
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c)
      out[static_cast<std::size_t>(t) * d + c] =
          wte[static_cast<std::size_t>(tokens[t]) * d + c] + wpe[static_cast<std::size_t>(t % seq) * d + c];
}

template <>
void embedding_forward<float>(int n, int d, int seq, const std::int32_t* tokens, const float* wte, const float* wpe,
                              float* out) {
  kernels::moe::embedding_forward(Device::Host, n, d, seq, tokens, wte, wpe, out);
}

template <class T>
void embedding_backward(int n, int d, int seq, const std::int32_t* tokens, const T* dout, T* dwte, T* dwpe) {
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < d; ++c) {
      dwte[static_cast<std::size_t>(tokens[t]) * d + c] += dout[static_cast<std::size_t>(t) * d + c];
      dwpe[static_cast<std::size_t>(t % seq) * d + c] += dout[static_cast<std::size_t>(t) * d + c];
    }
}

template <>
void embedding_backward<float>(int n, int d, int seq, const std::int32_t* tokens, const float* dout, float* dwte,
                               float* dwpe) {
  kernels::moe::embedding_backward(Device::Host, n, d, seq, tokens, dout, dwte, dwpe);
}

template <class T>
double sum_of_squares(std::size_t n, const T* x) {
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

template <>
double sum_of_squares<float>(std::size_t n, const float* x) {
  return kernels::moe::sum_of_squares(Device::Host, n, x);
}

namespace {
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)

// e^x in the scalar type: the vectorised exp_float in training, libm for the float64 references.
template <class T>
T exp_of(T x);
template <>
inline float exp_of(float x) {
  return kernels::moe::exp_float(x);
}
template <>
inline double exp_of(double x) {
  return std::exp(x);
}
}  // namespace

template <class T>
void gelu_forward(std::size_t n, const T* x, T* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<T>(0.5 * v * (1 + std::tanh(kGeluC * (v + 0.044715 * v * v * v))));
  }
}

// The float path is the CPU twin of the CUDA kernel: one per-element body for both
// (kernels/moe_elementwise.hpp), vectorised there.
template <>
void gelu_forward<float>(std::size_t n, const float* x, float* y) {
  kernels::moe::gelu_forward(Device::Host, n, x, y);
}

template <class T>
void gelu_backward(std::size_t n, const T* x, const T* dy, T* dx) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double u = kGeluC * (v + 0.044715 * v * v * v);
    const double t = std::tanh(u);
    const double du = kGeluC * (1 + 3 * 0.044715 * v * v);
    dx[i] = static_cast<T>(dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du));
  }
}

template <>
void gelu_backward<float>(std::size_t n, const float* x, const float* dy, float* dx) {
  kernels::moe::gelu_backward(Device::Host, n, x, dy, dx);
}

namespace {
// Copies head h's block (q, k or v: which = 0, 1, 2) of sequence b out of qkv into [seq, hd].
template <class T>
void gather_head(const T* qkv, int b, int h, int which, int seq, int d, int hd, T* out) {
  for (int i = 0; i < seq; ++i) {
    const T* src = qkv + (static_cast<std::size_t>(b) * seq + i) * 3 * d + which * d + h * hd;
    std::copy(src, src + hd, out + static_cast<std::size_t>(i) * hd);
  }
}
// Adds [seq, hd] into head h's columns of a row-major [batch * seq, stride] buffer.
template <class T>
void add_head(const T* in, int b, int h, int seq, int stride, int column, int hd, T* out) {
  for (int i = 0; i < seq; ++i) {
    T* dst = out + (static_cast<std::size_t>(b) * seq + i) * stride + column + h * hd;
    for (int c = 0; c < hd; ++c) dst[c] += in[static_cast<std::size_t>(i) * hd + c];
  }
}
}  // namespace

namespace {
// Softmax of a [seq, seq] block of attention scores, in place: row i over the positions it may
// see (0..i when causal, all otherwise); the rest get probability 0. The float64 reference; the
// float path is the row-wise twin below.
template <class T>
void attention_softmax_block(int seq, bool causal, T* p) {
  for (int i = 0; i < seq; ++i) {
    T* row = p + static_cast<std::size_t>(i) * seq;
    const int seen = causal ? i + 1 : seq;
    const T mx = *std::max_element(row, row + seen);
    for (int j = 0; j < seen; ++j) row[j] = exp_of<T>(row[j] - mx);
    double z = 0;
    for (int j = 0; j < seen; ++j) z += row[j];
    const T inv_z = static_cast<T>(1.0 / z);
    for (int j = 0; j < seen; ++j) row[j] *= inv_z;
    std::fill(row + seen, row + seq, T(0));
  }
}
template <>
void attention_softmax_block<float>(int seq, bool causal, float* p) {
  kernels::moe::attention_softmax_forward(Device::Host, static_cast<std::size_t>(seq), seq, causal, p);
}

// Its backward, in place on ds (dprobs in, dscores * scale out).
template <class T>
void attention_softmax_backward_block(int seq, bool causal, const T* p, T* ds, T scale) {
  for (int i = 0; i < seq; ++i) {
    T* row = ds + static_cast<std::size_t>(i) * seq;
    const T* pr = p + static_cast<std::size_t>(i) * seq;
    const int seen = causal ? i + 1 : seq;
    double dot = 0;
    for (int j = 0; j < seen; ++j) dot += static_cast<double>(pr[j]) * row[j];
    for (int j = 0; j < seq; ++j) row[j] = j < seen ? static_cast<T>(pr[j] * (row[j] - dot) * scale) : T(0);
  }
}
template <>
void attention_softmax_backward_block<float>(int seq, bool causal, const float* p, float* ds, float scale) {
  kernels::moe::attention_softmax_backward(Device::Host, static_cast<std::size_t>(seq), seq, causal, p, ds, scale);
}
}  // namespace

// Per (sequence, head): scores = q k^T / sqrt(hd) as one GEMM, softmax per row over the
// positions it may see (0..i when causal, all otherwise; the rest get probability 0), then
// out = probs v as another.
template <class T>
void attention_forward(int batch, int seq, int d, int heads, const T* qkv, T* out, T* probs, Precision precision,
                       bool causal) {
  const int hd = d / heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  const std::size_t block = static_cast<std::size_t>(seq) * hd;
  std::vector<T> q(block), k(block), v(block), o(block);
  std::fill(out, out + static_cast<std::size_t>(batch) * seq * d, T(0));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      gather_head(qkv, b, h, 0, seq, d, hd, q.data());
      gather_head(qkv, b, h, 1, seq, d, hd, k.data());
      gather_head(qkv, b, h, 2, seq, d, hd, v.data());
      T* p = probs + (static_cast<std::size_t>(b) * heads + h) * seq * seq;
      matmul<T>(false, true, seq, seq, hd, scale, q.data(), k.data(), T(0), p, precision);
      attention_softmax_block<T>(seq, causal, p);
      matmul<T>(false, false, seq, hd, seq, T(1), p, v.data(), T(0), o.data(), precision);
      add_head(o.data(), b, h, seq, d, 0, hd, out);
    }
}

template <class T>
void attention_backward(int batch, int seq, int d, int heads, const T* qkv, const T* probs, const T* dout, T* dqkv,
                        Precision precision, bool causal) {
  const int hd = d / heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  const std::size_t block = static_cast<std::size_t>(seq) * hd;
  std::vector<T> q(block), k(block), v(block), dout_h(block), grad(block), ds(static_cast<std::size_t>(seq) * seq);
  std::fill(dqkv, dqkv + static_cast<std::size_t>(batch) * seq * 3 * d, T(0));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      gather_head(qkv, b, h, 0, seq, d, hd, q.data());
      gather_head(qkv, b, h, 1, seq, d, hd, k.data());
      gather_head(qkv, b, h, 2, seq, d, hd, v.data());
      for (int i = 0; i < seq; ++i) {
        const T* src = dout + (static_cast<std::size_t>(b) * seq + i) * d + h * hd;
        std::copy(src, src + hd, dout_h.data() + static_cast<std::size_t>(i) * hd);
      }
      const T* p = probs + (static_cast<std::size_t>(b) * heads + h) * seq * seq;
      matmul<T>(true, false, seq, hd, seq, T(1), p, dout_h.data(), T(0), grad.data(), precision);  // dv = p^T dout
      add_head(grad.data(), b, h, seq, 3 * d, 2 * d, hd, dqkv);
      matmul<T>(false, true, seq, seq, hd, T(1), dout_h.data(), v.data(), T(0), ds.data(), precision);  // dp = dout v^T
      attention_softmax_backward_block<T>(seq, causal, p, ds.data(), scale);
      matmul<T>(false, false, seq, hd, seq, T(1), ds.data(), k.data(), T(0), grad.data(), precision);  // dq = ds k
      add_head(grad.data(), b, h, seq, 3 * d, 0, hd, dqkv);
      matmul<T>(true, false, seq, hd, seq, T(1), ds.data(), q.data(), T(0), grad.data(), precision);  // dk = ds^T q
      add_head(grad.data(), b, h, seq, 3 * d, d, hd, dqkv);
    }
}

template <class T>
double cross_entropy(int n, int v, const T* logits, const std::int32_t* targets, T scale, T* dlogits) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const T* l = logits + static_cast<std::size_t>(i) * v;
    T* dl = dlogits + static_cast<std::size_t>(i) * v;
    const T mx = *std::max_element(l, l + v);
    for (int j = 0; j < v; ++j) dl[j] = exp_of<T>(l[j] - mx);
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
double cross_entropy<float>(int n, int v, const float* logits, const std::int32_t* targets, float scale,
                            float* dlogits) {
  std::vector<double> row_loss(static_cast<std::size_t>(n));
  kernels::moe::cross_entropy(Device::Host, n, v, logits, targets, scale, dlogits, row_loss.data());
  double total = 0;
  for (double loss : row_loss) total += loss;
  return total * static_cast<double>(scale);
}

// Both types: the templates above. The float paths of the other ops are the explicit
// specialisations (the CPU twins), so only their float64 references are instantiated here.
#define SKEW_MOE_OPS(T)                                                                                 \
  template void linear_forward<T>(int, int, int, const T*, const T*, const T*, T*, Precision);          \
  template void linear_backward<T>(int, int, int, const T*, const T*, const T*, T*, T*, T*, Precision); \
  template void attention_forward<T>(int, int, int, int, const T*, T*, T*, Precision, bool);            \
  template void attention_backward<T>(int, int, int, int, const T*, const T*, const T*, T*, Precision, bool);
SKEW_MOE_OPS(float)
SKEW_MOE_OPS(double)
template void layernorm_forward<double>(int, int, const double*, const double*, const double*, double*, double*,
                                        double*);
template void layernorm_backward<double>(int, int, const double*, const double*, const double*, const double*,
                                         const double*, double*, double*, double*);
template void gelu_forward<double>(std::size_t, const double*, double*);
template void gelu_backward<double>(std::size_t, const double*, const double*, double*);
template double cross_entropy<double>(int, int, const double*, const std::int32_t*, double, double*);
template void embedding_forward<double>(int, int, int, const std::int32_t*, const double*, const double*, double*);
template void embedding_backward<double>(int, int, int, const std::int32_t*, const double*, double*, double*);
template double sum_of_squares<double>(std::size_t, const double*);

}  // namespace skew::moe
