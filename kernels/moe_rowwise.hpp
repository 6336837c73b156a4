// Row-wise ops of the GPT-MoE step with one body for the host and the device (SKEW_HD):
// layernorm forward and backward, token + position embedding, the softmax of attention (causal
// for GPT, over the whole sequence for BERT)
// (the GEMMs around it stay kernels::gemm / cuBLAS), cross-entropy, and the global gradient norm.
//
// A row body takes (lane, lanes, reduce): lane l of `lanes` cooperating threads visits columns
// l, l + lanes, ... and `reduce` combines the lanes' partial sums and maxima. The CPU twins run
// each row with lanes = 1 (reduce is then the identity); the CUDA kernels run one warp per row
// (lanes = 32, reduce = warp shuffles). Indexing and arithmetic are therefore the CPU's, tested
// here; only the summation order differs (fp32 tolerances between the two).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/host_device.hpp"
#include "core/tensor.hpp"
#include "kernels/moe_elementwise.hpp"

namespace skew::kernels::moe {

// Combines the partials of `lanes` threads: the identity on the host (one lane per row), warp
// shuffles (butterfly: every lane gets the result) on the device, where lanes is the warp.
struct LaneReduce {
  template <class T>
  SKEW_HD T sum(T v) const {
#if defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
    return v;
  }
  SKEW_HD float max(float v) const {
#if defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = other > v ? other : v;
    }
#endif
    return v;
  }
};

SKEW_HD inline double sqrt_double(double v) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(v);
#else
  return std::sqrt(v);
#endif
}
SKEW_HD inline double log_double(double v) {
#if defined(__CUDA_ARCH__)
  return ::log(v);
#else
  return std::log(v);
#endif
}

// The row sums (mean, variance, normaliser, dot products) accumulate in fp64, as the float CPU
// path did before it became this twin: its results are unchanged bit for bit, a row far from
// zero does not overflow the variance, and the few fp64 operations per element cost nothing in
// kernels bound by memory.
constexpr double kLayerNormEps = 1e-5;

// y = (x - mean) * rstd * g + b over one row of d; keeps mean and 1/std (lane 0 writes them).
SKEW_HD inline void layernorm_forward_row(int d, const float* x, const float* g, const float* b, float* y, float* mean,
                                          float* rstd, int lane, int lanes, const LaneReduce& reduce) {
  double sum = 0;
  for (int j = lane; j < d; j += lanes) sum += x[j];
  const double mu = reduce.sum(sum) / d;
  double squares = 0;  // two passes: no cancellation of E[x^2] - mu^2 for rows far from zero
  for (int j = lane; j < d; j += lanes) squares += (x[j] - mu) * (x[j] - mu);
  const double rs = 1.0 / sqrt_double(reduce.sum(squares) / d + kLayerNormEps);
  for (int j = lane; j < d; j += lanes) y[j] = static_cast<float>((x[j] - mu) * rs) * g[j] + b[j];
  if (lane == 0) *mean = static_cast<float>(mu), *rstd = static_cast<float>(rs);
}

// The normalised input as the backward sees it: from the fp32 mean and rstd the forward kept.
SKEW_HD inline float layernorm_norm(float x, float mean, float rstd) {
  return (x - mean) * rstd;
}

// dx of one row: rstd * (dy g - sum_j(dy g) / d - norm * sum_j(dy g norm) / d), overwritten.
SKEW_HD inline void layernorm_backward_row(int d, const float* x, const float* g, float mean, float rstd,
                                           const float* dy, float* dx, int lane, int lanes, const LaneReduce& reduce) {
  double sum_dn = 0, sum_dn_norm = 0;
  for (int j = lane; j < d; j += lanes) {
    const double dn = dy[j] * g[j];
    sum_dn += dn;
    sum_dn_norm += dn * layernorm_norm(x[j], mean, rstd);
  }
  sum_dn = reduce.sum(sum_dn);
  sum_dn_norm = reduce.sum(sum_dn_norm);
  for (int j = lane; j < d; j += lanes) {
    const double norm = layernorm_norm(x[j], mean, rstd);
    dx[j] = static_cast<float>(rstd * (dy[j] * g[j] - sum_dn / d - norm * sum_dn_norm / d));
  }
}

// Column j's share of dg and db from rows [row_begin, row_end), added row by row to *dg and *db
// (a column reduction: the CPU runs all rows at once, the GPU chunks of rows and then sums the
// chunks' partials).
SKEW_HD inline void layernorm_param_grad_column(std::size_t row_begin, std::size_t row_end, int d, int j,
                                                const float* x, const float* mean, const float* rstd, const float* dy,
                                                float* dg, float* db) {
  float sum_g = *dg, sum_b = *db;
  for (std::size_t i = row_begin; i < row_end; ++i) {
    const std::size_t at = i * static_cast<std::size_t>(d) + static_cast<std::size_t>(j);
    sum_g += static_cast<float>(dy[at] * static_cast<double>(layernorm_norm(x[at], mean[i], rstd[i])));
    sum_b += dy[at];
  }
  *dg = sum_g;
  *db = sum_b;
}

// Element `at` of the embedded input [n, d]: row t = at / d is token tokens[t] at position
// t % seq, so the element reads wte[tokens[t] * d + c] and wpe[(t % seq) * d + c].
struct EmbeddingIndex {
  std::size_t token, position;
};
SKEW_HD inline EmbeddingIndex embedding_index(std::size_t at, int d, int seq, const std::int32_t* tokens) {
  const std::size_t t = at / static_cast<std::size_t>(d), c = at % static_cast<std::size_t>(d);
  return {static_cast<std::size_t>(tokens[t]) * static_cast<std::size_t>(d) + c,
          (t % static_cast<std::size_t>(seq)) * static_cast<std::size_t>(d) + c};
}

// The largest of a row's first `count` entries (lane-strided, then reduced). -FLT_MAX to start:
// a row of -inf gives NaN, as a row of NaN does, which the trainer stops on.
SKEW_HD inline float row_max(int count, const float* row, int lane, int lanes, const LaneReduce& reduce) {
  float mx = -3.40282347e38f;
  for (int j = lane; j < count; j += lanes) mx = row[j] > mx ? row[j] : mx;
  return reduce.max(mx);
}

// How many leading entries of attention score row r (query position r % seq) it may see: up to
// its own position when causal, the whole sequence otherwise.
SKEW_HD inline int attention_row_valid(std::size_t r, int seq, bool causal) {
  return causal ? static_cast<int>(r % static_cast<std::size_t>(seq)) + 1 : seq;
}

// Softmax, in place, of one attention score row of length `len`: the first `valid` entries
// become probabilities, the rest (future positions under the causal mask) zeros.
SKEW_HD inline void softmax_forward_row(int len, int valid, float* row, int lane, int lanes, const LaneReduce& reduce) {
  const float mx = row_max(valid, row, lane, lanes, reduce);
  double z = 0;
  for (int j = lane; j < valid; j += lanes) {
    row[j] = exp_float(row[j] - mx);
    z += row[j];
  }
  const float inv_z = static_cast<float>(1.0 / reduce.sum(z));
  for (int j = lane; j < len; j += lanes) row[j] = j < valid ? row[j] * inv_z : 0.0f;
}

// Softmax backward of one such row, in place on grad (dprobs in, dscores out), times `scale`
// (the 1/sqrt(head_dim) of the scores): ds = p (dp - sum_j p dp) scale, zero past `valid`.
SKEW_HD inline void softmax_backward_row(int len, int valid, const float* probs, float* grad, float scale, int lane,
                                         int lanes, const LaneReduce& reduce) {
  double dot = 0;
  for (int j = lane; j < valid; j += lanes) dot += static_cast<double>(probs[j]) * grad[j];
  dot = reduce.sum(dot);
  for (int j = lane; j < len; j += lanes)
    grad[j] = j < valid ? static_cast<float>(probs[j] * (grad[j] - dot) * scale) : 0.0f;
}

// Cross-entropy of one row of logits against `target`: returns log-sum-exp - logit[target]
// (unscaled, fp64) and writes dlogits = scale * (softmax - onehot).
SKEW_HD inline double cross_entropy_row(int v, const float* logits, std::int32_t target, float scale, float* dlogits,
                                        int lane, int lanes, const LaneReduce& reduce) {
  const float mx = row_max(v, logits, lane, lanes, reduce);
  double z = 0;
  for (int j = lane; j < v; j += lanes) {
    dlogits[j] = exp_float(logits[j] - mx);
    z += dlogits[j];
  }
  z = reduce.sum(z);
  const float factor = static_cast<float>(scale / z);
  for (int j = lane; j < v; j += lanes) {
    dlogits[j] *= factor;
    if (j == target) dlogits[j] -= scale;
  }
  return mx + log_double(z) - logits[target];
}

// The global gradient norm sums squares in two levels: fp64 partials over chunks of
// kSquaresChunk elements (a thread block on the GPU), then the partials.
constexpr std::size_t kSquaresChunk = 8192;
SKEW_HD inline double sum_squares_lane(const float* x, std::size_t begin, std::size_t end, int lane, int lanes) {
  double sum = 0;
  for (std::size_t i = begin + static_cast<std::size_t>(lane); i < end; i += static_cast<std::size_t>(lanes))
    sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// The factor that clips a gradient of global norm `norm` to `max_norm` (0: no clipping).
SKEW_HD inline float grad_clip_scale(double norm, double max_norm) {
  return max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / norm) : 1.0f;
}

// The ops over all rows on `device` (Host: the CPU twins; Cuda: device pointers, the kernels).
// layernorm_backward overwrites dx and *adds* into dg and db, as every backward of lib/moe.
void layernorm_forward(Device device, int n, int d, const float* x, const float* g, const float* b, float* y,
                       float* mean, float* rstd);
void layernorm_backward(Device device, int n, int d, const float* x, const float* g, const float* mean,
                        const float* rstd, const float* dy, float* dx, float* dg, float* db);
// out[n, d] = wte[tokens] + wpe[position]; backward adds dout into the rows of dwte and dwpe.
void embedding_forward(Device device, int n, int d, int seq, const std::int32_t* tokens, const float* wte,
                       const float* wpe, float* out);
void embedding_backward(Device device, int n, int d, int seq, const std::int32_t* tokens, const float* dout,
                        float* dwte, float* dwpe);
// `rows` rows of length seq, row r being query position r % seq (blocks of [seq, seq] scores);
// `causal`: row r sees positions 0..r % seq only (GPT), else all of them (BERT).
void attention_softmax_forward(Device device, std::size_t rows, int seq, bool causal, float* scores);
void attention_softmax_backward(Device device, std::size_t rows, int seq, bool causal, const float* probs, float* grad,
                                float scale);
// Writes dlogits and the unscaled per-row losses (n doubles, on `device`).
void cross_entropy(Device device, int n, int v, const float* logits, const std::int32_t* targets, float scale,
                   float* dlogits, double* row_loss);
// Sum of squares of x[0, n) (the host gets the scalar back).
double sum_of_squares(Device device, std::size_t n, const float* x);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void layernorm_forward(int n, int d, const float* x, const float* g, const float* b, float* y, float* mean,
                       float* rstd);
void layernorm_backward(int n, int d, const float* x, const float* g, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dg, float* db);
void embedding_forward(int n, int d, int seq, const std::int32_t* tokens, const float* wte, const float* wpe,
                       float* out);
void embedding_backward(int n, int d, int seq, const std::int32_t* tokens, const float* dout, float* dwte, float* dwpe);
void attention_softmax_forward(std::size_t rows, int seq, bool causal, float* scores);
void attention_softmax_backward(std::size_t rows, int seq, bool causal, const float* probs, float* grad, float scale);
void cross_entropy(int n, int v, const float* logits, const std::int32_t* targets, float scale, float* dlogits,
                   double* row_loss);
double sum_of_squares(std::size_t n, const float* x);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
