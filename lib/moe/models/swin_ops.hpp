// The layers a Swin Transformer adds to the GPT blocks of ops.hpp, with hand-written backward
// passes, templated on the scalar type like ops.hpp (float for training, double for the
// finite-difference tests). Feature maps are row-major [batch, height, width, channels]; windows
// are [batch * windows, w * w, channels], windows in row-major order within each image. The data
// movement (patchify, window partition and reverse with the cyclic shift, the shifted-window mask,
// the relative position bias, patch merging) is kernels/moe_swin.hpp's, on either device.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/moe_swin.hpp"
#include "lib/moe/ops.hpp"

namespace skew::moe {

using kernels::moe::merge_gather;
using kernels::moe::merge_scatter;
using kernels::moe::patchify;
using kernels::moe::window_partition;
using kernels::moe::window_reverse;

// The shifted-window attention mask [windows_per_image, N, N] (N = window^2) on the host:
// kernels::moe::window_mask's; all zeros when shift = 0.
template <class T>
std::vector<T> shifted_window_mask(int height, int width, int window, int shift);

// Swin's relative position index [N * N]: token pair (i, j) of a window reads the bias table
// [(2w-1)^2, heads] at row (dy + w - 1) * (2w - 1) + (dx + w - 1), (dy, dx) = pos(i) - pos(j).
std::vector<std::int32_t> relative_position_index(int window);

// Multi-head self-attention within w x w windows (N = w^2 tokens): qkv[windows, N, 3d] (q, k, v
// blocks of d = heads * head_dim) -> out[windows, N, d], with logits q.k / sqrt(head_dim) +
// table[index(i, j), h] + mask[window % mask_windows, i, j] (mask null: none). probs[windows,
// heads, N, N] is kept for the backward, which writes dqkv and accumulates dtable.
template <class T>
void window_attention_forward(int windows, int window, int d, int heads, const T* qkv, const T* table, const T* mask,
                              int mask_windows, T* out, T* probs, Precision precision);
template <class T>
void window_attention_backward(int windows, int window, int d, int heads, const T* qkv, const T* probs, const T* dout,
                               T* dqkv, T* dtable, Precision precision);

}  // namespace skew::moe
