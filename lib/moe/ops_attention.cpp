// Multi-head attention (lib/moe/ops.hpp): the float path on either device, each sequence's
// per-head GEMMs as one strided-batched GEMM over the heads' column blocks of qkv (no gathered
// copies), the softmax over all score rows at once; and the float64 reference, which gathers each
// head and loops over (sequence, head) as the float path did before it ran on GPUs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_rowwise.hpp"
#include "lib/moe/ops.hpp"
#include "lib/moe/ops_internal.hpp"

namespace skew::moe {

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
// float path is kernels::moe::attention_softmax_forward, below.
template <class T>
void attention_softmax_block(int seq, bool causal, T* p) {
  for (int i = 0; i < seq; ++i) {
    T* row = p + static_cast<std::size_t>(i) * seq;
    const int seen = causal ? i + 1 : seq;
    const T mx = *std::max_element(row, row + seen);
    for (int j = 0; j < seen; ++j) row[j] = std::exp(row[j] - mx);
    double z = 0;
    for (int j = 0; j < seen; ++j) z += row[j];
    const T inv_z = static_cast<T>(1.0 / z);
    for (int j = 0; j < seen; ++j) row[j] *= inv_z;
    std::fill(row + seen, row + seq, T(0));
  }
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
}  // namespace

// Per (sequence, head): scores = q k^T / sqrt(hd) as one GEMM, softmax per row over the
// positions it may see (0..i when causal, all otherwise; the rest get probability 0), then
// out = probs v as another.
template <class T>
void attention_forward(int batch, int seq, int d, int heads, const T* qkv, T* out, T* probs, Precision precision,
                       bool causal, Device device) {
  require_host_reference(device, "attention_forward");
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
                        Precision precision, bool causal, Device device) {
  require_host_reference(device, "attention_backward");
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

namespace {
// One strided-batched GEMM over the heads of one sequence, fp32 or bf16 operands.
void heads_gemm(Device device, Precision precision, bool trans_a, bool trans_b, int m, int n, int k, int lda, int ldb,
                int ldc, float alpha, const float* a, const float* b, float* c, const kernels::BatchStrides& strides) {
  kernels::GemmShape s;
  s.trans_a = trans_a, s.trans_b = trans_b, s.m = m, s.n = n, s.k = k, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
  if (precision == Precision::Bf16)
    kernels::gemm_bf16_strided_batched(device, s, alpha, a, b, 0.0f, c, strides);
  else
    kernels::gemm_strided_batched(device, s, alpha, a, b, 0.0f, c, strides);
}

int head_dim(int d, int heads) {
  SKEW_CHECK(heads > 0 && d % heads == 0, "attention: d_model " << d << " is not a multiple of heads " << heads);
  return d / heads;
}
}  // namespace

// Head h of sequence b: q, k and v are the [seq, hd] blocks at columns h * hd, d + h * hd and
// 2d + h * hd of qkv's rows (row stride 3d), so consecutive heads are hd elements apart; a
// head's [seq, seq] probabilities are seq * seq apart; its output columns h * hd of out (stride d).
template <>
void attention_forward<float>(int batch, int seq, int d, int heads, const float* qkv, float* out, float* probs,
                              Precision precision, bool causal, Device device) {
  const int hd = head_dim(d, heads);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const std::int64_t square = static_cast<std::int64_t>(seq) * seq;
  const kernels::BatchStrides scores_strides{hd, hd, square, heads}, output_strides{square, hd, hd, heads};
  for (int b = 0; b < batch; ++b) {
    const float* q = qkv + static_cast<std::size_t>(b) * seq * 3 * d;
    heads_gemm(device, precision, false, true, seq, seq, hd, 3 * d, 3 * d, seq, scale, q, q + d,
               probs + b * heads * square, scores_strides);  // scores = q k^T / sqrt(hd)
  }
  kernels::moe::attention_softmax_forward(device, static_cast<std::size_t>(batch) * heads * seq, seq, causal, probs);
  for (int b = 0; b < batch; ++b) {
    const float* v = qkv + static_cast<std::size_t>(b) * seq * 3 * d + 2 * d;
    heads_gemm(device, precision, false, false, seq, hd, seq, seq, 3 * d, d, 1.0f, probs + b * heads * square, v,
               out + static_cast<std::size_t>(b) * seq * d, output_strides);  // out = probs v
  }
}

// Per sequence (the score gradients of all its heads in one scratch of heads * seq * seq):
// dv = p^T dout, dp = dout v^T, ds = softmax backward of dp (times 1/sqrt(hd)), dq = ds k and
// dk = ds^T q, each written straight into its head's columns of dqkv.
template <>
void attention_backward<float>(int batch, int seq, int d, int heads, const float* qkv, const float* probs,
                               const float* dout, float* dqkv, Precision precision, bool causal, Device device) {
  const int hd = head_dim(d, heads);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const std::int64_t square = static_cast<std::int64_t>(seq) * seq;
  thread_local Tensor ds_slot;
  float* ds = scratch_of(ds_slot, static_cast<std::size_t>(heads * square), DType::F32, device).data<float>();
  const kernels::BatchStrides from_probs{square, hd, hd, heads}, to_scores{hd, hd, square, heads};
  for (int b = 0; b < batch; ++b) {
    const float* q = qkv + static_cast<std::size_t>(b) * seq * 3 * d;
    const float* p = probs + b * heads * square;
    const float* dout_b = dout + static_cast<std::size_t>(b) * seq * d;
    float* dq = dqkv + static_cast<std::size_t>(b) * seq * 3 * d;
    heads_gemm(device, precision, true, false, seq, hd, seq, seq, d, 3 * d, 1.0f, p, dout_b, dq + 2 * d, from_probs);
    heads_gemm(device, precision, false, true, seq, seq, hd, d, 3 * d, seq, 1.0f, dout_b, q + 2 * d, ds, to_scores);
    kernels::moe::attention_softmax_backward(device, static_cast<std::size_t>(heads) * seq, seq, causal, p, ds, scale);
    heads_gemm(device, precision, false, false, seq, hd, seq, seq, 3 * d, 3 * d, 1.0f, ds, q + d, dq, from_probs);
    heads_gemm(device, precision, true, false, seq, hd, seq, seq, 3 * d, 3 * d, 1.0f, ds, q, dq + d, from_probs);
  }
}

template void attention_forward<double>(int, int, int, int, const double*, double*, double*, Precision, bool, Device);
template void attention_backward<double>(int, int, int, int, const double*, const double*, const double*, double*,
                                         Precision, bool, Device);

}  // namespace skew::moe
