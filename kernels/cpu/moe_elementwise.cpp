#include "kernels/moe_elementwise.hpp"

#include "core/error.hpp"
#include "kernels/dispatch.hpp"

namespace skew::kernels::moe {

// target_clones: GCC builds each loop for AVX-512, AVX2 and the x86-64 baseline and picks one at
// load time, so the 16-wide version runs where the CPU has it without changing global flags.
namespace {
__attribute__((target_clones("avx512f", "avx2", "default"))) void gelu_forward_host(std::size_t n, const float* x,
                                                                                    float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_forward_element(x[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void gelu_backward_host(std::size_t n, const float* x,
                                                                                     const float* dy, float* dx) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = gelu_backward_element(x[i], dy[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void adamw_update_host(float* w, const float* g, float* m,
                                                                                    float* v, std::size_t begin,
                                                                                    std::size_t end, float weight_decay,
                                                                                    const AdamWStep& k) {
  const AdamWStep step = k;  // a local copy: the loop need not reload it after each store
  for (std::size_t i = begin; i < end; ++i) adamw_element(w[i], g[i], m[i], v[i], step, weight_decay);
}
}  // namespace

void broadcast_row(Device device, std::size_t rows, std::size_t cols, const float* row, float* y) {
  SKEW_ON_CUDA(device, "bias broadcast", cuda::broadcast_row(rows, cols, row, y));
  for (std::size_t at = 0; at < rows * cols; ++at) broadcast_row_element(at, cols, row, y);
}

void column_sum_add(Device device, std::size_t rows, std::size_t cols, const float* m, float* sum) {
  SKEW_ON_CUDA(device, "column sum", cuda::column_sum_add(rows, cols, m, sum));
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) column_sum_add(i, i + 1, cols, j, m, sum + j);
}

void add_inplace(Device device, std::size_t n, float* x, const float* y) {
  SKEW_ON_CUDA(device, "residual add", cuda::add_inplace(n, x, y));
  for (std::size_t i = 0; i < n; ++i) add_element(i, x, y);
}

void gelu_forward(Device device, std::size_t n, const float* x, float* y) {
  SKEW_ON_CUDA(device, "GELU", cuda::gelu_forward(n, x, y));
  gelu_forward_host(n, x, y);
}

void gelu_backward(Device device, std::size_t n, const float* x, const float* dy, float* dx) {
  SKEW_ON_CUDA(device, "GELU backward", cuda::gelu_backward(n, x, dy, dx));
  gelu_backward_host(n, x, dy, dx);
}

void adamw_update(Device device, float* w, const float* g, float* m, float* v, std::size_t begin, std::size_t end,
                  bool decay, const AdamWStep& k) {
  SKEW_ON_CUDA(device, "AdamW", cuda::adamw_update(w + begin, g + begin, m + begin, v + begin, end - begin, decay, k));
  adamw_update_host(w, g, m, v, begin, end, decay ? k.decay : 0.0f, k);
}

}  // namespace skew::kernels::moe
