#include "lib/moe/models/swin_ops.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace skew::moe {

namespace {
std::size_t at(std::size_t a, std::size_t b) {
  return a * b;
}

// Rows [N, hd] of head h's part (0 q, 1 k, 2 v) of qkv[N, 3d], and back.
template <class T>
void gather_part(const T* qkv, int tokens, int d, int hd, int part, int h, T* out) {
  for (int i = 0; i < tokens; ++i) std::copy_n(qkv + at(i, 3 * d) + part * d + h * hd, hd, out + at(i, hd));
}
template <class T>
void scatter_part(const T* in, int tokens, int d, int hd, int part, int h, T* qkv) {
  for (int i = 0; i < tokens; ++i) std::copy_n(in + at(i, hd), hd, qkv + at(i, 3 * d) + part * d + h * hd);
}
}  // namespace

template <class T>
std::vector<T> shifted_window_mask(int height, int width, int window, int shift) {
  std::vector<T> mask(static_cast<std::size_t>(height / window) * static_cast<std::size_t>(width / window) *
                      at(window * window, window * window));
  kernels::moe::window_mask<T>(Device::Host, height, width, window, shift, mask.data());
  return mask;
}

std::vector<std::int32_t> relative_position_index(int window) {
  const int N = window * window;
  std::vector<std::int32_t> index(at(N, N));
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) index[at(i, N) + j] = kernels::moe::swin_relative_index(i, j, window);
  return index;
}

template <class T>
void window_attention_forward(int windows, int window, int d, int heads, const T* qkv, const T* table, const T* mask,
                              int mask_windows, T* out, T* probs, Precision precision) {
  SKEW_CHECK(d % heads == 0, "attention width " << d << " is not a multiple of its " << heads << " heads");
  const int hd = d / heads, N = window * window;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<T> q(at(N, hd)), k(q.size()), v(q.size()), o(q.size()), bias(at(heads, at(N, N)));
  kernels::moe::relative_bias<T>(Device::Host, window, heads, table, bias.data());
  for (int w = 0; w < windows; ++w) {
    const T* qkv_w = qkv + at(w, N) * 3 * d;
    const T* mask_w = mask ? mask + at(w % mask_windows, N * N) : nullptr;
    for (int h = 0; h < heads; ++h) {
      gather_part(qkv_w, N, d, hd, 0, h, q.data());
      gather_part(qkv_w, N, d, hd, 1, h, k.data());
      gather_part(qkv_w, N, d, hd, 2, h, v.data());
      T* p = probs + at(at(w, heads) + h, N * N);
      matmul<T>(false, true, N, N, hd, scale, q.data(), k.data(), T(0), p, precision);
      for (int i = 0; i < N; ++i) {
        T* row = p + at(i, N);
        for (int j = 0; j < N; ++j) {
          row[j] += bias[at(h, at(N, N)) + at(i, N) + j];
          if (mask_w) row[j] += mask_w[at(i, N) + j];
        }
        // The diagonal is never masked, so the row maximum is finite and masked terms become 0.
        const T mx = *std::max_element(row, row + N);
        double z = 0;
        for (int j = 0; j < N; ++j) z += (row[j] = std::exp(row[j] - mx));
        const T inv_z = static_cast<T>(1.0 / z);
        for (int j = 0; j < N; ++j) row[j] *= inv_z;
      }
      matmul<T>(false, false, N, hd, N, T(1), p, v.data(), T(0), o.data(), precision);
      for (int i = 0; i < N; ++i) std::copy_n(o.data() + at(i, hd), hd, out + (at(w, N) + i) * d + h * hd);
    }
  }
}

template <class T>
void window_attention_backward(int windows, int window, int d, int heads, const T* qkv, const T* probs, const T* dout,
                               T* dqkv, T* dtable, Precision precision) {
  const int hd = d / heads, N = window * window;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<T> q(at(N, hd)), k(q.size()), v(q.size()), dout_h(q.size()), grad(q.size());
  // The logits' gradient of every window and head, which the bias table's backward sums by offset.
  std::vector<T> dlogits(at(at(windows, heads), at(N, N)));
  for (int w = 0; w < windows; ++w) {
    const T* qkv_w = qkv + at(w, N) * 3 * d;
    T* dqkv_w = dqkv + at(w, N) * 3 * d;
    for (int h = 0; h < heads; ++h) {
      gather_part(qkv_w, N, d, hd, 0, h, q.data());
      gather_part(qkv_w, N, d, hd, 1, h, k.data());
      gather_part(qkv_w, N, d, hd, 2, h, v.data());
      for (int i = 0; i < N; ++i) std::copy_n(dout + (at(w, N) + i) * d + h * hd, hd, dout_h.data() + at(i, hd));
      const T* p = probs + at(at(w, heads) + h, N * N);
      matmul<T>(true, false, N, hd, N, T(1), p, dout_h.data(), T(0), grad.data(), precision);  // dv = p^T dout
      scatter_part(grad.data(), N, d, hd, 2, h, dqkv_w);
      T* ds = dlogits.data() + at(at(w, heads) + h, N * N);
      matmul<T>(false, true, N, N, hd, T(1), dout_h.data(), v.data(), T(0), ds, precision);  // dp
      for (int i = 0; i < N; ++i) {                                                          // softmax backward
        const T* prow = p + at(i, N);
        T* row = ds + at(i, N);
        double dot = 0;
        for (int j = 0; j < N; ++j) dot += static_cast<double>(prow[j]) * row[j];
        for (int j = 0; j < N; ++j) row[j] = prow[j] * (row[j] - static_cast<T>(dot));
      }
      matmul<T>(false, false, N, hd, N, scale, ds, k.data(), T(0), grad.data(), precision);  // dq
      scatter_part(grad.data(), N, d, hd, 0, h, dqkv_w);
      matmul<T>(true, false, N, hd, N, scale, ds, q.data(), T(0), grad.data(), precision);  // dk
      scatter_part(grad.data(), N, d, hd, 1, h, dqkv_w);
    }
  }
  kernels::moe::relative_bias_backward<T>(Device::Host, windows, window, heads, dlogits.data(), dtable);
}

#define SKEW_SWIN_OPS(T)                                                                                               \
  template std::vector<T> shifted_window_mask<T>(int, int, int, int);                                                  \
  template void window_attention_forward<T>(int, int, int, int, const T*, const T*, const T*, int, T*, T*, Precision); \
  template void window_attention_backward<T>(int, int, int, int, const T*, const T*, const T*, T*, T*, Precision);
SKEW_SWIN_OPS(float)
SKEW_SWIN_OPS(double)

}  // namespace skew::moe
