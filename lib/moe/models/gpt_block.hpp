// One pre-LayerNorm GPT block's dense chain, forward and backward, on buffers of one device:
// the attention half (LayerNorm, qkv linear, multi-head attention, output linear, residual, the
// second LayerNorm) and the dense FFN (linear, GELU, linear). GptMoe (gpt_network.cpp) runs every
// block through these, with an MoE layer in place of the dense FFN where it has one; the dense
// block harness (lib/moe/dense_block.hpp) runs one block through the same functions, which is how
// the chain is tested float-vs-float64 on the host and GPU-vs-CPU. Templated on the scalar type:
// float on the host or a GPU, double on the host (the float64 reference).
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/device_array.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

struct GptBlockShape {
  int batch = 1, seq = 1, d = 1, heads = 1, d_ff = 1;
  bool causal = true;
  Precision precision = Precision::Fp32;
  Device device = Device::Host;
  int tokens() const { return batch * seq; }
  std::size_t rows_by(int width) const { return static_cast<std::size_t>(tokens()) * static_cast<std::size_t>(width); }
};

// The block's parameters (T = const T: weights) or their gradients (T: accumulated into); the FFN
// ones are null in an MoE block.
template <class P>
struct GptBlockParams {
  P *ln1_g = nullptr, *ln1_b = nullptr, *w_qkv = nullptr, *b_qkv = nullptr, *w_o = nullptr, *b_o = nullptr;
  P *ln2_g = nullptr, *ln2_b = nullptr, *w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr;
};

// What the forward keeps for the backward, and the backward's scratch; on the block's device.
template <class T>
struct GptBlockActs {
  explicit GptBlockActs(Device device)
      : x_in(device),
        ln1(device),
        mean1(device),
        rstd1(device),
        qkv(device),
        att(device),
        probs(device),
        x_mid(device),
        ln2(device),
        mean2(device),
        rstd2(device),
        hpre(device),
        h(device),
        branch(device),
        dh(device),
        datt(device),
        dqkv(device) {}
  DeviceArray<T> x_in, ln1, mean1, rstd1, qkv, att, probs, x_mid, ln2, mean2, rstd2, hpre, h;
  DeviceArray<T> branch, dh, datt, dqkv;  // scratch: a residual branch's output or gradient
  // The kept activations by name (the dense FFN's only when it ran), for tests.
  std::vector<std::pair<std::string, const DeviceArray<T>*>> named() const {
    std::vector<std::pair<std::string, const DeviceArray<T>*>> out = {
        {"x_in", &x_in},   {"ln1", &ln1},     {"mean1", &mean1}, {"rstd1", &rstd1}, {"qkv", &qkv},    {"att", &att},
        {"probs", &probs}, {"x_mid", &x_mid}, {"ln2", &ln2},     {"mean2", &mean2}, {"rstd2", &rstd2}};
    if (!h.empty()) out.insert(out.end(), {{"hpre", &hpre}, {"h", &h}});
    return out;
  }
};

// x (the residual stream, [tokens, d]) += attention(LayerNorm1(x)); then A.ln2 = LayerNorm2(x),
// the FFN's input.
template <class T>
void attention_half_forward(const GptBlockShape& s, const GptBlockParams<const T>& w, DeviceArray<T>& x,
                            GptBlockActs<T>& A) {
  const int n = s.tokens(), d = s.d;
  const std::size_t nd = s.rows_by(d);
  A.x_in.assign(x);
  A.ln1.resize(nd), A.mean1.resize(static_cast<std::size_t>(n)), A.rstd1.resize(static_cast<std::size_t>(n));
  layernorm_forward<T>(n, d, x.data(), w.ln1_g, w.ln1_b, A.ln1.data(), A.mean1.data(), A.rstd1.data(), s.device);
  A.qkv.resize(3 * nd), A.att.resize(nd);
  A.probs.resize(static_cast<std::size_t>(s.batch) * s.heads * s.seq * s.seq);
  linear_forward<T>(n, d, 3 * d, A.ln1.data(), w.w_qkv, w.b_qkv, A.qkv.data(), s.precision, s.device);
  attention_forward<T>(s.batch, s.seq, d, s.heads, A.qkv.data(), A.att.data(), A.probs.data(), s.precision, s.causal,
                       s.device);
  A.branch.resize(nd);
  linear_forward<T>(n, d, d, A.att.data(), w.w_o, w.b_o, A.branch.data(), s.precision, s.device);
  add_inplace<T>(nd, x.data(), A.branch.data(), s.device);
  A.x_mid.assign(x);
  A.ln2.resize(nd), A.mean2.resize(static_cast<std::size_t>(n)), A.rstd2.resize(static_cast<std::size_t>(n));
  layernorm_forward<T>(n, d, x.data(), w.ln2_g, w.ln2_b, A.ln2.data(), A.mean2.data(), A.rstd2.data(), s.device);
}

// f = W2 GELU(W1 A.ln2 + b1) + b2, [tokens, d].
template <class T>
void dense_ffn_forward(const GptBlockShape& s, const GptBlockParams<const T>& w, GptBlockActs<T>& A,
                       DeviceArray<T>& f) {
  const int n = s.tokens(), d = s.d, F = s.d_ff;
  A.hpre.resize(s.rows_by(F)), A.h.resize(s.rows_by(F)), f.resize(s.rows_by(d));
  linear_forward<T>(n, d, F, A.ln2.data(), w.w1, w.b1, A.hpre.data(), s.precision, s.device);
  gelu_forward<T>(A.h.size(), A.hpre.data(), A.h.data(), s.device);
  linear_forward<T>(n, F, d, A.h.data(), w.w2, w.b2, f.data(), s.precision, s.device);
}

// From df (the gradient of the FFN's output): dln2, the gradient of its input A.ln2.
template <class T>
void dense_ffn_backward(const GptBlockShape& s, const GptBlockParams<const T>& w, const GptBlockParams<T>& g,
                        GptBlockActs<T>& A, const DeviceArray<T>& df, DeviceArray<T>& dln2) {
  const int n = s.tokens(), d = s.d, F = s.d_ff;
  A.dh.resize(s.rows_by(F)), dln2.resize(s.rows_by(d));
  linear_backward<T>(n, F, d, A.h.data(), w.w2, df.data(), A.dh.data(), g.w2, g.b2, s.precision, s.device);
  gelu_backward<T>(A.dh.size(), A.hpre.data(), A.dh.data(), A.dh.data(), s.device);
  linear_backward<T>(n, d, F, A.ln2.data(), w.w1, A.dh.data(), dln2.data(), g.w1, g.b1, s.precision, s.device);
}

// dx (the residual stream's gradient, in and out) gains the attention half's share, given dln2
// (the gradient of A.ln2); dln2 is used as scratch.
template <class T>
void attention_half_backward(const GptBlockShape& s, const GptBlockParams<const T>& w, const GptBlockParams<T>& g,
                             GptBlockActs<T>& A, DeviceArray<T>& dln2, DeviceArray<T>& dx) {
  const int n = s.tokens(), d = s.d;
  const std::size_t nd = s.rows_by(d);
  A.branch.resize(nd), A.datt.resize(nd), A.dqkv.resize(3 * nd);
  layernorm_backward<T>(n, d, A.x_mid.data(), w.ln2_g, A.mean2.data(), A.rstd2.data(), dln2.data(), A.branch.data(),
                        g.ln2_g, g.ln2_b, s.device);
  add_inplace<T>(nd, dx.data(), A.branch.data(), s.device);
  linear_backward<T>(n, d, d, A.att.data(), w.w_o, dx.data(), A.datt.data(), g.w_o, g.b_o, s.precision, s.device);
  attention_backward<T>(s.batch, s.seq, d, s.heads, A.qkv.data(), A.probs.data(), A.datt.data(), A.dqkv.data(),
                        s.precision, s.causal, s.device);
  DeviceArray<T>& dln1 = dln2;  // dln2 is spent: the LayerNorm above has read it
  linear_backward<T>(n, d, 3 * d, A.ln1.data(), w.w_qkv, A.dqkv.data(), dln1.data(), g.w_qkv, g.b_qkv, s.precision,
                     s.device);
  layernorm_backward<T>(n, d, A.x_in.data(), w.ln1_g, A.mean1.data(), A.rstd1.data(), dln1.data(), A.branch.data(),
                        g.ln1_g, g.ln1_b, s.device);
  add_inplace<T>(nd, dx.data(), A.branch.data(), s.device);
}

}  // namespace skew::moe
