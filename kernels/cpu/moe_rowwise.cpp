// CPU twins of kernels/moe_rowwise.hpp: each row (or column, or element) by the shared body with
// one lane, in index order.
#include "kernels/moe_rowwise.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "kernels/dispatch.hpp"

namespace skew::kernels::moe {
namespace {
constexpr LaneReduce kOneLane{};

std::size_t row_offset(std::size_t row, int width) {
  return row * static_cast<std::size_t>(width);
}
}  // namespace

void layernorm_forward(Device device, int n, int d, const float* x, const float* g, const float* b, float* y,
                       float* mean, float* rstd) {
  SKEW_ON_CUDA(device, "layernorm", cuda::layernorm_forward(n, d, x, g, b, y, mean, rstd));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    layernorm_forward_row(d, x + row_offset(i, d), g, b, y + row_offset(i, d), mean + i, rstd + i, 0, 1, kOneLane);
}

void layernorm_backward(Device device, int n, int d, const float* x, const float* g, const float* mean,
                        const float* rstd, const float* dy, float* dx, float* dg, float* db) {
  SKEW_ON_CUDA(device, "layernorm backward", cuda::layernorm_backward(n, d, x, g, mean, rstd, dy, dx, dg, db));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    layernorm_backward_row(d, x + row_offset(i, d), g, mean[i], rstd[i], dy + row_offset(i, d), dx + row_offset(i, d),
                           0, 1, kOneLane);
  for (int j = 0; j < d; ++j)
    layernorm_param_grad_column(0, static_cast<std::size_t>(n), d, j, x, mean, rstd, dy, dg + j, db + j);
}

void embedding_forward(Device device, int n, int d, int seq, const std::int32_t* tokens, const float* wte,
                       const float* wpe, float* out) {
  SKEW_ON_CUDA(device, "embedding", cuda::embedding_forward(n, d, seq, tokens, wte, wpe, out));
  const std::size_t count = row_offset(static_cast<std::size_t>(n), d);
  for (std::size_t at = 0; at < count; ++at) {
    const EmbeddingIndex index = embedding_index(at, d, seq, tokens);
    out[at] = wte[index.token] + wpe[index.position];
  }
}

void embedding_backward(Device device, int n, int d, int seq, const std::int32_t* tokens, const float* dout,
                        float* dwte, float* dwpe) {
  SKEW_ON_CUDA(device, "embedding backward", cuda::embedding_backward(n, d, seq, tokens, dout, dwte, dwpe));
  const std::size_t count = row_offset(static_cast<std::size_t>(n), d);
  for (std::size_t at = 0; at < count; ++at) {
    const EmbeddingIndex index = embedding_index(at, d, seq, tokens);
    dwte[index.token] += dout[at];
    dwpe[index.position] += dout[at];
  }
}

void attention_softmax_forward(Device device, std::size_t rows, int seq, bool causal, float* scores) {
  SKEW_ON_CUDA(device, "attention softmax", cuda::attention_softmax_forward(rows, seq, causal, scores));
  for (std::size_t r = 0; r < rows; ++r)
    softmax_forward_row(seq, attention_row_valid(r, seq, causal), scores + row_offset(r, seq), 0, 1, kOneLane);
}

void attention_softmax_backward(Device device, std::size_t rows, int seq, bool causal, const float* probs, float* grad,
                                float scale) {
  SKEW_ON_CUDA(device, "attention softmax backward",
               cuda::attention_softmax_backward(rows, seq, causal, probs, grad, scale));
  for (std::size_t r = 0; r < rows; ++r)
    softmax_backward_row(seq, attention_row_valid(r, seq, causal), probs + row_offset(r, seq),
                         grad + row_offset(r, seq), scale, 0, 1, kOneLane);
}

void cross_entropy(Device device, int n, int v, const float* logits, const std::int32_t* targets, float scale,
                   float* dlogits, double* row_loss) {
  SKEW_ON_CUDA(device, "cross-entropy", cuda::cross_entropy(n, v, logits, targets, scale, dlogits, row_loss));
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
    row_loss[i] =
        cross_entropy_row(v, logits + row_offset(i, v), targets[i], scale, dlogits + row_offset(i, v), 0, 1, kOneLane);
}

double sum_of_squares(Device device, std::size_t n, const float* x) {
  SKEW_ON_CUDA(device, "sum of squares", cuda::sum_of_squares(n, x));
  double total = 0;
  for (std::size_t begin = 0; begin < n; begin += kSquaresChunk)
    total += sum_squares_lane(x, begin, std::min(n, begin + kSquaresChunk), 0, 1);
  return total;
}

}  // namespace skew::kernels::moe
