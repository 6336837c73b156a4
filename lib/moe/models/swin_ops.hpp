// The layers a Swin Transformer adds to the GPT blocks of ops.hpp, with hand-written backward
// passes, templated on the scalar type like ops.hpp (float for training, double for the
// finite-difference tests). Feature maps are row-major [batch, height, width, channels]; windows
// are [batch * windows, w * w, channels], windows in row-major order within each image.
#pragma once
#include <cstdint>
#include <vector>

#include "lib/moe/ops.hpp"

namespace skew::moe {

// Patch embedding, the stride-p p x p convolution of Swin written as a linear over patches:
// images[b, H, W, cin] -> patches[b, H/p * W/p, p * p * cin], each patch's pixels in (row, col,
// channel) order, so that patches x w[p*p*cin, C] + bias equals the convolution.
template <class T>
void patchify(int batch, int height, int width, int channels, int patch, const T* images, T* patches);

// Window partition of a feature map cyclically shifted by `shift` (torch.roll by -shift on both
// axes, Swin's SW-MSA step): out[window, token] = x[(h + shift) % H, (w + shift) % W] where
// (h, w) is the token's place in the shifted map. window_reverse is its inverse, and, since the
// partition is a permutation, each is the other's backward.
template <class T>
void window_partition(int batch, int height, int width, int channels, int window, int shift, const T* x, T* out);
template <class T>
void window_reverse(int batch, int height, int width, int channels, int window, int shift, const T* windows, T* x);

// The shifted-window attention mask [windows_per_image, N, N] (N = window^2): 0 where two tokens
// of a window come from the same region of the shifted map (Swin's 3 x 3 slices), -infinity where
// the cyclic shift brought them together from opposite edges; all zeros when shift = 0.
template <class T>
std::vector<T> shifted_window_mask(int height, int width, int window, int shift);

// Swin's relative position index [N * N]: token pair (i, j) of a window reads the bias table
// [(2w-1)^2, heads] at row (dy + w - 1) * (2w - 1) + (dx + w - 1), (dy, dx) = pos(i) - pos(j).
std::vector<std::int32_t> relative_position_index(int window);

// Multi-head self-attention within windows: qkv[windows, N, 3d] (q, k, v blocks of d = heads *
// head_dim) -> out[windows, N, d], with logits q.k / sqrt(head_dim) + table[index[i, j], h] +
// mask[window % mask_windows, i, j] (mask null: none). probs[windows, heads, N, N] is kept for
// the backward, which writes dqkv and accumulates dtable.
template <class T>
void window_attention_forward(int windows, int tokens, int d, int heads, const T* qkv, const T* table,
                              const std::int32_t* index, const T* mask, int mask_windows, T* out, T* probs,
                              Precision precision);
template <class T>
void window_attention_backward(int windows, int tokens, int d, int heads, const T* qkv, const T* probs,
                               const std::int32_t* index, const T* dout, T* dqkv, T* dtable, Precision precision);

// Patch merging's 2 x 2 neighbour concatenation: x[b, H, W, C] -> out[b, H/2, W/2, 4C] in Swin's
// order x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]; merge_scatter is its
// backward (and inverse). The LayerNorm and the 4C -> 2C linear after it are ops.hpp's.
template <class T>
void merge_gather(int batch, int height, int width, int channels, const T* x, T* out);
template <class T>
void merge_scatter(int batch, int height, int width, int channels, const T* merged, T* dx);

}  // namespace skew::moe
