#include "lib/moe/models/swin_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/core/error.hpp"

namespace skew::moe {

namespace {
std::size_t at(std::size_t a, std::size_t b) { return a * b; }

void check_windows(int height, int width, int window, int shift) {
  SKEW_CHECK(window > 0 && height % window == 0 && width % window == 0,
             "window " << window << " does not tile the " << height << " x " << width << " feature map");
  SKEW_CHECK(shift >= 0 && shift < window, "window shift " << shift << " is outside [0, window " << window << ")");
}

// Calls f(window index, token index, source row, source column) for every token of every window of
// one image: the token's place in the map shifted by `shift`, and where it comes from.
template <class F>
void for_each_window_token(int height, int width, int window, int shift, F&& f) {
  const int across = width / window;
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w) {
      const int win = (h / window) * across + w / window, token = (h % window) * window + w % window;
      f(win, token, (h + shift) % height, (w + shift) % width);
    }
}

// Rows [N, hd] of head h's part (0 q, 1 k, 2 v) of qkv[N, 3d], and back.
template <class T>
void gather_part(const T* qkv, int tokens, int d, int hd, int part, int h, T* out) {
  for (int i = 0; i < tokens; ++i)
    std::copy_n(qkv + at(i, 3 * d) + part * d + h * hd, hd, out + at(i, hd));
}
template <class T>
void scatter_part(const T* in, int tokens, int d, int hd, int part, int h, T* qkv) {
  for (int i = 0; i < tokens; ++i)
    std::copy_n(in + at(i, hd), hd, qkv + at(i, 3 * d) + part * d + h * hd);
}
}  // namespace

template <class T>
void patchify(int batch, int height, int width, int channels, int patch, const T* images, T* patches) {
  SKEW_CHECK(patch > 0 && height % patch == 0 && width % patch == 0,
             "patch size " << patch << " does not tile the " << height << " x " << width << " image");
  const int ph = height / patch, pw = width / patch;
  const std::size_t per_patch = at(patch * patch, channels);
  for (int b = 0; b < batch; ++b)
    for (int y = 0; y < ph; ++y)
      for (int x = 0; x < pw; ++x) {
        T* out = patches + (at(b, ph * pw) + at(y, pw) + x) * per_patch;
        for (int r = 0; r < patch; ++r)
          std::copy_n(images + ((at(b, height) + y * patch + r) * width + x * patch) * channels, patch * channels,
                      out + at(r, patch * channels));
      }
}

template <class T>
void window_partition(int batch, int height, int width, int channels, int window, int shift, const T* x, T* out) {
  check_windows(height, width, window, shift);
  const std::size_t N = at(window, window), image = at(height, width);
  for (int b = 0; b < batch; ++b)
    for_each_window_token(height, width, window, shift, [&](int win, int token, int sh, int sw) {
      std::copy_n(x + (b * image + at(sh, width) + sw) * channels, channels,
                  out + ((b * image / N + win) * N + token) * channels);
    });
}

template <class T>
void window_reverse(int batch, int height, int width, int channels, int window, int shift, const T* windows, T* x) {
  check_windows(height, width, window, shift);
  const std::size_t N = at(window, window), image = at(height, width);
  for (int b = 0; b < batch; ++b)
    for_each_window_token(height, width, window, shift, [&](int win, int token, int sh, int sw) {
      std::copy_n(windows + ((b * image / N + win) * N + token) * channels, channels,
                  x + (b * image + at(sh, width) + sw) * channels);
    });
}

template <class T>
std::vector<T> shifted_window_mask(int height, int width, int window, int shift) {
  check_windows(height, width, window, shift);
  const int N = window * window, windows = (height / window) * (width / window);
  std::vector<T> mask(at(windows, N * N), T(0));
  if (shift == 0) return mask;
  // Swin's img_mask: the shifted map cut into 3 slices per axis, [0, H-w), [H-w, H-s), [H-s, H);
  // the last window row and column hold tokens rolled over from the opposite edge.
  const auto slice = [&](int pos, int size) { return pos < size - window ? 0 : pos < size - shift ? 1 : 2; };
  std::vector<int> region(at(windows, N));
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w) {
      const int win = (h / window) * (width / window) + w / window, token = (h % window) * window + w % window;
      region[at(win, N) + token] = slice(h, height) * 3 + slice(w, width);
    }
  for (int win = 0; win < windows; ++win)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j)
        if (region[at(win, N) + i] != region[at(win, N) + j])
          mask[at(win, N * N) + at(i, N) + j] = -std::numeric_limits<T>::infinity();
  return mask;
}

std::vector<std::int32_t> relative_position_index(int window) {
  const int N = window * window, span = 2 * window - 1;
  std::vector<std::int32_t> index(at(N, N));
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      const int dy = i / window - j / window, dx = i % window - j % window;
      index[at(i, N) + j] = (dy + window - 1) * span + dx + window - 1;
    }
  return index;
}

template <class T>
void window_attention_forward(int windows, int tokens, int d, int heads, const T* qkv, const T* table,
                              const std::int32_t* index, const T* mask, int mask_windows, T* out, T* probs,
                              Precision precision) {
  SKEW_CHECK(d % heads == 0, "attention width " << d << " is not a multiple of its " << heads << " heads");
  const int hd = d / heads, N = tokens;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<T> q(at(N, hd)), k(q.size()), v(q.size()), o(q.size());
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
          row[j] += table[at(index[at(i, N) + j], heads) + h];
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
void window_attention_backward(int windows, int tokens, int d, int heads, const T* qkv, const T* probs,
                               const std::int32_t* index, const T* dout, T* dqkv, T* dtable, Precision precision) {
  const int hd = d / heads, N = tokens;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<T> q(at(N, hd)), k(q.size()), v(q.size()), dout_h(q.size()), grad(q.size()), ds(at(N, N));
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
      matmul<T>(false, true, N, N, hd, T(1), dout_h.data(), v.data(), T(0), ds.data(), precision);  // dp
      for (int i = 0; i < N; ++i) {  // softmax backward; the bias table gets the logits' gradient
        const T* prow = p + at(i, N);
        T* row = ds.data() + at(i, N);
        double dot = 0;
        for (int j = 0; j < N; ++j) dot += static_cast<double>(prow[j]) * row[j];
        for (int j = 0; j < N; ++j) {
          row[j] = prow[j] * (row[j] - static_cast<T>(dot));
          dtable[at(index[at(i, N) + j], heads) + h] += row[j];
        }
      }
      matmul<T>(false, false, N, hd, N, scale, ds.data(), k.data(), T(0), grad.data(), precision);  // dq
      scatter_part(grad.data(), N, d, hd, 0, h, dqkv_w);
      matmul<T>(true, false, N, hd, N, scale, ds.data(), q.data(), T(0), grad.data(), precision);  // dk
      scatter_part(grad.data(), N, d, hd, 1, h, dqkv_w);
    }
  }
}

template <class T>
void merge_gather(int batch, int height, int width, int channels, const T* x, T* out) {
  SKEW_CHECK(height % 2 == 0 && width % 2 == 0,
             "patch merging needs an even feature map, not " << height << " x " << width);
  const int mh = height / 2, mw = width / 2;
  const int dy[4] = {0, 1, 0, 1}, dx[4] = {0, 0, 1, 1};
  for (int b = 0; b < batch; ++b)
    for (int y = 0; y < mh; ++y)
      for (int xx = 0; xx < mw; ++xx)
        for (int q = 0; q < 4; ++q)
          std::copy_n(x + (at(b, height) + 2 * y + dy[q]) * width * channels + at(2 * xx + dx[q], channels), channels,
                      out + ((at(b, mh) + y) * mw + xx) * 4 * channels + at(q, channels));
}

template <class T>
void merge_scatter(int batch, int height, int width, int channels, const T* merged, T* dx) {
  const int mh = height / 2, mw = width / 2;
  const int dy[4] = {0, 1, 0, 1}, dxs[4] = {0, 0, 1, 1};
  for (int b = 0; b < batch; ++b)
    for (int y = 0; y < mh; ++y)
      for (int xx = 0; xx < mw; ++xx)
        for (int q = 0; q < 4; ++q)
          std::copy_n(merged + ((at(b, mh) + y) * mw + xx) * 4 * channels + at(q, channels), channels,
                      dx + (at(b, height) + 2 * y + dy[q]) * width * channels + at(2 * xx + dxs[q], channels));
}

#define SKEW_SWIN_OPS(T)                                                                                              \
  template void patchify<T>(int, int, int, int, int, const T*, T*);                                                  \
  template void window_partition<T>(int, int, int, int, int, int, const T*, T*);                                     \
  template void window_reverse<T>(int, int, int, int, int, int, const T*, T*);                                       \
  template std::vector<T> shifted_window_mask<T>(int, int, int, int);                                                \
  template void window_attention_forward<T>(int, int, int, int, const T*, const T*, const std::int32_t*, const T*,   \
                                            int, T*, T*, Precision);                                                 \
  template void window_attention_backward<T>(int, int, int, int, const T*, const T*, const std::int32_t*, const T*,  \
                                             T*, T*, Precision);                                                     \
  template void merge_gather<T>(int, int, int, int, const T*, T*);                                                   \
  template void merge_scatter<T>(int, int, int, int, const T*, T*);
SKEW_SWIN_OPS(float)
SKEW_SWIN_OPS(double)

}  // namespace skew::moe
