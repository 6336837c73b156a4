// The data movement a Swin Transformer adds to the GPT blocks, one SKEW_HD body per output
// element that the CPU twin (kernels/cpu/moe_swin.cpp) runs in index order and the CUDA kernel
// (kernels/cuda/moe_swin.cu) runs one thread per element. The layouts that move whole tokens
// index an element by (token, channel), so the CPU twin finds a token's source once for its
// contiguous channels. Feature maps are row-major
// [batch, height, width, channels]; windows [batch * windows, w * w, channels], windows in
// row-major order within each image; N = w * w tokens per window.
//   patchify             images -> patches[b, H/p * W/p, p * p * cin], each patch's pixels in
//                        (row, col, channel) order (the stride-p convolution as a linear)
//   window_partition     out[window, token] = x[(h + shift) % H, (w + shift) % W], (h, w) the
//                        token's place in the map cyclically shifted by `shift` (torch.roll by
//                        -shift, SW-MSA); window_reverse writes it back: a permutation, so each
//                        is the other's inverse and backward
//   window_mask          the shifted windows' attention mask [windows, N, N]: 0 for two tokens of
//                        one region of the shifted map (Swin's 3 x 3 slices), -inf for tokens the
//                        roll brought together from opposite edges
//   relative_bias        bias[head, i, j] = table[index(i, j), head], table [(2w-1)^2, heads]
//   relative_bias_backward  dtable[r, head] += the logits' gradients of every pair at offset r,
//                        over windows then tokens i ascending: one entry per thread, no atomics,
//                        the order a sequential loop over (window, i, j) adds them in
//   merge_gather         patch merging's 2 x 2 concat x[b, H, W, C] -> [b, H/2 * W/2, 4C] in
//                        Swin's order x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2];
//                        merge_scatter is its inverse and backward
// T = float on either device, double on the host only (the float64 references).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

// Swin's relative position index of tokens i, j of a w x w window: the row of the (2w-1)^2 table
// that holds the bias of their offset (dy, dx) = pos(i) - pos(j).
SKEW_HD inline int swin_relative_index(int i, int j, int window) {
  const int dy = i / window - j / window, dx = i % window - j % window;
  return (dy + window - 1) * (2 * window - 1) + dx + window - 1;
}

// Where output element i of patchify reads in the images.
SKEW_HD inline std::int64_t patch_source(std::int64_t i, int height, int width, int channels, int patch) {
  const int per_patch = patch * patch * channels, across = width / patch, per_image = (height / patch) * across;
  const int k = static_cast<int>(i % per_patch), p = static_cast<int>((i / per_patch) % per_image);
  const std::int64_t b = i / per_patch / per_image;
  const int r = k / (patch * channels), s = (k / channels) % patch, c = k % channels;
  return ((b * height + (p / across) * patch + r) * width + (p % across) * patch + s) * channels + c;
}

// The pixel (b * height + h) * width + w of the feature map that token t of the windowed layout
// holds; its channels are contiguous on both sides.
SKEW_HD inline std::int64_t window_source(std::int64_t t, int height, int width, int window, int shift) {
  const int N = window * window, across = width / window, per_image = (height / window) * across;
  const int token = static_cast<int>(t % N), win = static_cast<int>((t / N) % per_image);
  const std::int64_t b = t / N / per_image;
  const int h = (win / across) * window + token / window, w = (win % across) * window + token % window;
  return (b * height + (h + shift) % height) * width + (w + shift) % width;
}

// The pixel that part p = cell * 4 + q of the merged layout holds (q in Swin's order).
SKEW_HD inline std::int64_t merge_source(std::int64_t p, int height, int width) {
  const int q = static_cast<int>(p % 4), mw = width / 2, per_image = (height / 2) * mw;
  const std::int64_t cell = p / 4, b = cell / per_image;
  const int y = static_cast<int>(cell % per_image) / mw, x = static_cast<int>(cell % per_image) % mw;
  return (b * height + 2 * y + q % 2) * width + 2 * x + q / 2;
}

template <class T>
SKEW_HD inline void patchify_element(std::int64_t i, int height, int width, int channels, int patch, const T* images,
                                     T* patches) {
  patches[i] = images[patch_source(i, height, width, channels, patch)];
}

// Channel c of token t (the row and column of the [tokens, channels] layouts).
template <class T>
SKEW_HD inline void window_partition_element(std::int64_t t, int c, int height, int width, int channels, int window,
                                             int shift, const T* x, T* out) {
  out[t * channels + c] = x[window_source(t, height, width, window, shift) * channels + c];
}

template <class T>
SKEW_HD inline void window_reverse_element(std::int64_t t, int c, int height, int width, int channels, int window,
                                           int shift, const T* windows, T* x) {
  x[window_source(t, height, width, window, shift) * channels + c] = windows[t * channels + c];
}

// The region (0..8) of token `token` of window `win` in the shifted map: per axis, slice 0 is
// [0, size - w), 1 is [size - w, size - shift), 2 is [size - shift, size) (Swin's img_mask).
SKEW_HD inline int window_region(int win, int token, int height, int width, int window, int shift) {
  const int across = width / window;
  const int h = (win / across) * window + token / window, w = (win % across) * window + token % window;
  const int row = h < height - window ? 0 : h < height - shift ? 1 : 2;
  const int col = w < width - window ? 0 : w < width - shift ? 1 : 2;
  return row * 3 + col;
}

template <class T>
SKEW_HD inline void window_mask_element(std::int64_t e, int height, int width, int window, int shift, T* mask) {
  const int N = window * window, j = static_cast<int>(e % N), i = static_cast<int>((e / N) % N);
  const int win = static_cast<int>(e / N / N);
  const bool apart =
      window_region(win, i, height, width, window, shift) != window_region(win, j, height, width, window, shift);
  mask[e] = apart ? static_cast<T>(-INFINITY) : T(0);
}

template <class T>
SKEW_HD inline void relative_bias_element(std::int64_t e, int window, int heads, const T* table, T* bias) {
  const int N = window * window, j = static_cast<int>(e % N), i = static_cast<int>((e / N) % N);
  const int h = static_cast<int>(e / N / N);
  bias[e] = table[swin_relative_index(i, j, window) * heads + h];
}

// dtable entry e = r * heads + h from dlogits [windows, heads, N, N].
template <class T>
SKEW_HD inline void relative_bias_backward_element(std::int64_t e, int windows, int window, int heads, const T* dlogits,
                                                   T* dtable) {
  const int N = window * window, span = 2 * window - 1, h = static_cast<int>(e % heads),
            r = static_cast<int>(e / heads);
  const int dy = r / span - (window - 1), dx = r % span - (window - 1);
  const int y_begin = dy > 0 ? dy : 0, y_end = dy < 0 ? window + dy : window;
  const int x_begin = dx > 0 ? dx : 0, x_end = dx < 0 ? window + dx : window;
  T acc = dtable[e];
  for (std::int64_t w = 0; w < windows; ++w) {
    const T* d = dlogits + (w * heads + h) * N * N;
    for (int y = y_begin; y < y_end; ++y)
      for (int x = x_begin; x < x_end; ++x) acc += d[(y * window + x) * N + (y - dy) * window + (x - dx)];
  }
  dtable[e] = acc;
}

// Channel c of part p.
template <class T>
SKEW_HD inline void merge_gather_element(std::int64_t p, int c, int height, int width, int channels, const T* x,
                                         T* out) {
  out[p * channels + c] = x[merge_source(p, height, width) * channels + c];
}

template <class T>
SKEW_HD inline void merge_scatter_element(std::int64_t p, int c, int height, int width, int channels, const T* merged,
                                          T* dx) {
  dx[merge_source(p, height, width) * channels + c] = merged[p * channels + c];
}

// Shapes are checked (the window or patch tiles the map, 0 <= shift < window, an even map to
// merge) before either twin runs.
template <class T>
void patchify(Device device, int batch, int height, int width, int channels, int patch, const T* images, T* patches);
template <class T>
void window_partition(Device device, int batch, int height, int width, int channels, int window, int shift, const T* x,
                      T* out);
template <class T>
void window_reverse(Device device, int batch, int height, int width, int channels, int window, int shift,
                    const T* windows, T* x);
// mask: [windows per image, N, N].
template <class T>
void window_mask(Device device, int height, int width, int window, int shift, T* mask);
// bias: [heads, N, N].
template <class T>
void relative_bias(Device device, int window, int heads, const T* table, T* bias);
template <class T>
void relative_bias_backward(Device device, int windows, int window, int heads, const T* dlogits, T* dtable);
template <class T>
void merge_gather(Device device, int batch, int height, int width, int channels, const T* x, T* out);
template <class T>
void merge_scatter(Device device, int batch, int height, int width, int channels, const T* merged, T* dx);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void patchify(std::int64_t n, int height, int width, int channels, int patch, const float* images, float* patches);
void window_partition(std::int64_t n, int height, int width, int channels, int window, int shift, const float* x,
                      float* out);
void window_reverse(std::int64_t n, int height, int width, int channels, int window, int shift, const float* windows,
                    float* x);
void window_mask(std::int64_t n, int height, int width, int window, int shift, float* mask);
void relative_bias(std::int64_t n, int window, int heads, const float* table, float* bias);
void relative_bias_backward(std::int64_t n, int windows, int window, int heads, const float* dlogits, float* dtable);
void merge_gather(std::int64_t n, int height, int width, int channels, const float* x, float* out);
void merge_scatter(std::int64_t n, int height, int width, int channels, const float* merged, float* dx);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
