// Dense building blocks of the GPT-MoE model with hand-written backward passes, templated on
// the scalar type: float for training, double for the finite-difference tests. The float paths
// run on the `device` their pointers live on (every pointer of one call, token ids included, on
// that device): the CPU twins of the CUDA kernels (kernels/moe_*.hpp) and OpenBLAS on the host,
// the kernels and cuBLAS on a GPU. The double paths are independent float64 references and run on
// the host only. Row-major matrices; every backward *accumulates* into parameter gradients and
// writes input gradients.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace skew::moe {

// Inputs of a matrix product: fp32 as stored, or rounded to bf16 with fp32 accumulation (mixed
// precision, as on GPU tensor cores; the operands are rounded, the stored fp32 values are not).
enum class Precision { Fp32, Bf16 };
Precision parse_precision(const std::string& name);

// C = alpha * op(A) op(B) + beta * C; float goes to kernels::gemm / gemm_bf16 (OpenBLAS or the
// AVX512-BF16 kernel / cuBLAS), double to a plain loop (tests only; with Bf16 it rounds the
// inputs to bf16 first, the float64 reference of mixed precision).
template <class T>
void matmul(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta, T* c,
            Precision precision, Device device = Device::Host);

// y[n,out] = x[n,in] w[in,out] + b[out]
template <class T>
void linear_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y, Precision precision,
                    Device device = Device::Host);
// dx = dy w^T (overwritten, skipped when dx is null); dw += x^T dy; db += colsum(dy)
template <class T>
void linear_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db,
                     Precision precision, Device device = Device::Host);

// Per-row LayerNorm with gain g and bias b; keeps mean and 1/std per row for the backward.
template <class T>
void layernorm_forward(int n, int d, const T* x, const T* g, const T* b, T* y, T* mean, T* rstd,
                       Device device = Device::Host);
template <class T>
void layernorm_backward(int n, int d, const T* x, const T* g, const T* mean, const T* rstd, const T* dy, T* dx, T* dg,
                        T* db, Device device = Device::Host);

// Token + position embedding: out[t] = wte[tokens[t]] + wpe[t % seq] (rows of d); the backward
// adds dout's rows into dwte and dwpe.
template <class T>
void embedding_forward(int n, int d, int seq, const std::int32_t* tokens, const T* wte, const T* wpe, T* out,
                       Device device = Device::Host);
template <class T>
void embedding_backward(int n, int d, int seq, const std::int32_t* tokens, const T* dout, T* dwte, T* dwpe,
                        Device device = Device::Host);

// Sum of squares of x[0, n), accumulated in float64 (the global gradient norm is its root).
template <class T>
double sum_of_squares(std::size_t n, const T* x, Device device = Device::Host);

// x += y over n elements: a residual connection.
template <class T>
void add_inplace(std::size_t n, T* x, const T* y, Device device = Device::Host);

// GELU, tanh approximation (GPT-2).
template <class T>
void gelu_forward(std::size_t n, const T* x, T* y, Device device = Device::Host);
template <class T>
void gelu_backward(std::size_t n, const T* x, const T* dy, T* dx,
                   Device device = Device::Host);  // dx = dy * gelu'(x)

// Multi-head self-attention on qkv[b, s, 3d] (q, k, v blocks of d = heads * head_dim):
// out[b, s, d]; probs[b, h, s, s] is kept for the backward. `causal`: position i attends to
// positions 0..i (GPT); otherwise to the whole sequence (BERT's bidirectional encoder). The float
// path runs each sequence's per-head GEMMs as one strided-batched GEMM on the heads' column
// blocks of qkv, and the softmax over all rows at once.
template <class T>
void attention_forward(int batch, int seq, int d, int heads, const T* qkv, T* out, T* probs, Precision precision,
                       bool causal = true, Device device = Device::Host);
template <class T>
void attention_backward(int batch, int seq, int d, int heads, const T* qkv, const T* probs, const T* dout, T* dqkv,
                        Precision precision, bool causal = true, Device device = Device::Host);

// Mean cross-entropy of logits[n, v] against targets, times `scale` (so callers can normalise
// by a global token count); writes dlogits = scale * (softmax - onehot). Returns the scaled sum
// (on a GPU: the n per-row losses come back to the host, the one copy of the step's loss).
template <class T>
double cross_entropy(int n, int v, const T* logits, const std::int32_t* targets, T scale, T* dlogits,
                     Device device = Device::Host);

}  // namespace skew::moe
