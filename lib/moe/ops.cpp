#include "lib/moe/ops.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/gemm.hpp"

namespace skew::moe {

template <>
void matmul<float>(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
                   float* c) {
  kernels::GemmShape s;
  s.trans_a = ta, s.trans_b = tb, s.m = m, s.n = n, s.k = k;
  kernels::gemm(Device::Host, s, alpha, a, b, beta, c);
}

template <>
void matmul<double>(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, const double* b, double beta,
                    double* c) {
  const int lda = ta ? m : k, ldb = tb ? k : n;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * n + j] = alpha * acc + (beta == 0 ? 0.0 : beta * c[i * n + j]);
    }
}

template <class T>
void linear_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y) {
  for (int i = 0; i < n; ++i) std::copy(b, b + out, y + static_cast<std::size_t>(i) * out);
  matmul<T>(false, false, n, out, in, T(1), x, w, T(1), y);
}

template <class T>
void linear_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
  if (dx) matmul<T>(false, true, n, in, out, T(1), dy, w, T(0), dx);
  matmul<T>(true, false, in, out, n, T(1), x, dy, T(1), dw);
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

namespace {
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
}

template <class T>
void gelu_forward(std::size_t n, const T* x, T* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<T>(0.5 * v * (1 + std::tanh(kGeluC * (v + 0.044715 * v * v * v))));
  }
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

template <class T>
void attention_forward(int batch, int seq, int d, int heads, const T* qkv, T* out, T* probs) {
  const int hd = d / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i) {
        const T* q = qkv + (static_cast<std::size_t>(b) * seq + i) * 3 * d + h * hd;
        T* p = probs + ((static_cast<std::size_t>(b) * heads + h) * seq + i) * seq;
        double mx = -1e300;
        for (int j = 0; j < seq; ++j) {
          if (j > i) {
            p[j] = 0;
            continue;
          }
          const T* k = qkv + (static_cast<std::size_t>(b) * seq + j) * 3 * d + d + h * hd;
          double s = 0;
          for (int c = 0; c < hd; ++c) s += q[c] * k[c];
          p[j] = static_cast<T>(s * scale);
          mx = std::max(mx, static_cast<double>(p[j]));
        }
        double z = 0;
        for (int j = 0; j <= i; ++j) z += std::exp(p[j] - mx);
        for (int j = 0; j <= i; ++j) p[j] = static_cast<T>(std::exp(p[j] - mx) / z);
        T* o = out + (static_cast<std::size_t>(b) * seq + i) * d + h * hd;
        for (int c = 0; c < hd; ++c) {
          double acc = 0;
          for (int j = 0; j <= i; ++j) acc += p[j] * qkv[(static_cast<std::size_t>(b) * seq + j) * 3 * d + 2 * d + h * hd + c];
          o[c] = static_cast<T>(acc);
        }
      }
}

template <class T>
void attention_backward(int batch, int seq, int d, int heads, const T* qkv, const T* probs, const T* dout, T* dqkv) {
  const int hd = d / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::fill(dqkv, dqkv + static_cast<std::size_t>(batch) * seq * 3 * d, T(0));
  std::vector<double> dp(static_cast<std::size_t>(seq));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i) {
        const std::size_t row_i = (static_cast<std::size_t>(b) * seq + i) * 3 * d;
        const T* p = probs + ((static_cast<std::size_t>(b) * heads + h) * seq + i) * seq;
        const T* doi = dout + (static_cast<std::size_t>(b) * seq + i) * d + h * hd;
        double dot = 0;
        for (int j = 0; j <= i; ++j) {
          const std::size_t row_j = (static_cast<std::size_t>(b) * seq + j) * 3 * d;
          double s = 0;
          for (int c = 0; c < hd; ++c) {
            s += doi[c] * qkv[row_j + 2 * d + h * hd + c];
            dqkv[row_j + 2 * d + h * hd + c] += static_cast<T>(p[j] * doi[c]);  // dv
          }
          dp[static_cast<std::size_t>(j)] = s;
          dot += s * p[j];
        }
        for (int j = 0; j <= i; ++j) {
          const std::size_t row_j = (static_cast<std::size_t>(b) * seq + j) * 3 * d;
          const double ds = p[j] * (dp[static_cast<std::size_t>(j)] - dot) * scale;
          for (int c = 0; c < hd; ++c) {
            dqkv[row_i + h * hd + c] += static_cast<T>(ds * qkv[row_j + d + h * hd + c]);      // dq
            dqkv[row_j + d + h * hd + c] += static_cast<T>(ds * qkv[row_i + h * hd + c]);      // dk
          }
        }
      }
}

template <class T>
double cross_entropy(int n, int v, const T* logits, const std::int32_t* targets, T scale, T* dlogits) {
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const T* l = logits + static_cast<std::size_t>(i) * v;
    T* dl = dlogits + static_cast<std::size_t>(i) * v;
    const double mx = *std::max_element(l, l + v);
    double z = 0;
    for (int j = 0; j < v; ++j) z += std::exp(l[j] - mx);
    const double lse = mx + std::log(z);
    total += lse - l[targets[i]];
    for (int j = 0; j < v; ++j) dl[j] = static_cast<T>(scale * std::exp(l[j] - lse));
    dl[targets[i]] -= scale;
  }
  return total * static_cast<double>(scale);
}

#define SKEW_MOE_OPS(T)                                                                                       \
  template void linear_forward<T>(int, int, int, const T*, const T*, const T*, T*);                          \
  template void linear_backward<T>(int, int, int, const T*, const T*, const T*, T*, T*, T*);                 \
  template void layernorm_forward<T>(int, int, const T*, const T*, const T*, T*, T*, T*);                    \
  template void layernorm_backward<T>(int, int, const T*, const T*, const T*, const T*, const T*, T*, T*, T*); \
  template void gelu_forward<T>(std::size_t, const T*, T*);                                                   \
  template void gelu_backward<T>(std::size_t, const T*, const T*, T*);                                        \
  template void attention_forward<T>(int, int, int, int, const T*, T*, T*);                                   \
  template void attention_backward<T>(int, int, int, int, const T*, const T*, const T*, T*);                  \
  template double cross_entropy<T>(int, int, const T*, const std::int32_t*, T, T*);
SKEW_MOE_OPS(float)
SKEW_MOE_OPS(double)

}  // namespace skew::moe
