// CPU twin of kernels/moe_swin.hpp: each op checks its shapes, then runs its element body over
// the output's index space in order (or hands the same index space to the CUDA twin).
#include "kernels/moe_swin.hpp"

#include <type_traits>

#include "core/error.hpp"
#include "kernels/moe_float64_host.hpp"

namespace skew::kernels::moe {

namespace {
void check_windows(int height, int width, int window, int shift) {
  SKEW_CHECK(window > 0 && height % window == 0 && width % window == 0,
             "window " << window << " does not tile the " << height << " x " << width << " feature map");
  SKEW_CHECK(shift >= 0 && shift < window, "window shift " << shift << " is outside [0, window " << window << ")");
}

void check_merge(int height, int width) {
  SKEW_CHECK(height % 2 == 0 && width % 2 == 0,
             "patch merging needs an even feature map, not " << height << " x " << width);
}

// The rows of the token layouts: every pixel of every image.
std::int64_t pixels(int batch, int height, int width) {
  return std::int64_t(batch) * height * width;
}

// Runs element(r, c) for the rows r in [0, rows) and columns c in [0, columns) on the host in
// order, or on_cuda(rows * columns) (the CUDA twin over the same index space) for a float call on
// Cuda. on_cuda takes `auto` so a float64 instantiation never resolves its float-only call.
template <class T, class OnCuda, class Element>
void run_over(Device device, const char* what, std::int64_t rows, int columns, OnCuda on_cuda, Element element) {
  if (runs_on_cuda<T>(device, what)) {
    if constexpr (std::is_same_v<T, float>) on_cuda(rows * columns);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) element(r, c);
}
}  // namespace

template <class T>
void patchify(Device device, int batch, int height, int width, int channels, int patch, const T* images, T* patches) {
  SKEW_CHECK(patch > 0 && height % patch == 0 && width % patch == 0,
             "patch size " << patch << " does not tile the " << height << " x " << width << " image");
  run_over<T>(
      device, "swin patchify", pixels(batch, height, width) * channels, 1,
      [&](auto count) { cuda::patchify(count, height, width, channels, patch, images, patches); },
      [&](std::int64_t i, int) { patchify_element(i, height, width, channels, patch, images, patches); });
}

template <class T>
void window_partition(Device device, int batch, int height, int width, int channels, int window, int shift, const T* x,
                      T* out) {
  check_windows(height, width, window, shift);
  run_over<T>(
      device, "swin window partition", pixels(batch, height, width), channels,
      [&](auto count) { cuda::window_partition(count, height, width, channels, window, shift, x, out); },
      [&](std::int64_t t, int c) { window_partition_element(t, c, height, width, channels, window, shift, x, out); });
}

template <class T>
void window_reverse(Device device, int batch, int height, int width, int channels, int window, int shift,
                    const T* windows, T* x) {
  check_windows(height, width, window, shift);
  run_over<T>(
      device, "swin window reverse", pixels(batch, height, width), channels,
      [&](auto count) { cuda::window_reverse(count, height, width, channels, window, shift, windows, x); },
      [&](std::int64_t t, int c) { window_reverse_element(t, c, height, width, channels, window, shift, windows, x); });
}

template <class T>
void window_mask(Device device, int height, int width, int window, int shift, T* mask) {
  check_windows(height, width, window, shift);
  const std::int64_t N = std::int64_t(window) * window, n = std::int64_t(height / window) * (width / window) * N * N;
  run_over<T>(
      device, "swin window mask", n, 1,
      [&](auto count) { cuda::window_mask(count, height, width, window, shift, mask); },
      [&](std::int64_t e, int) { window_mask_element(e, height, width, window, shift, mask); });
}

template <class T>
void relative_bias(Device device, int window, int heads, const T* table, T* bias) {
  const std::int64_t N = std::int64_t(window) * window, n = heads * N * N;
  run_over<T>(
      device, "swin relative position bias", n, 1,
      [&](auto count) { cuda::relative_bias(count, window, heads, table, bias); },
      [&](std::int64_t e, int) { relative_bias_element(e, window, heads, table, bias); });
}

template <class T>
void relative_bias_backward(Device device, int windows, int window, int heads, const T* dlogits, T* dtable) {
  const std::int64_t n = std::int64_t(2 * window - 1) * (2 * window - 1) * heads;
  run_over<T>(
      device, "swin relative position bias backward", n, 1,
      [&](auto count) { cuda::relative_bias_backward(count, windows, window, heads, dlogits, dtable); },
      [&](std::int64_t e, int) { relative_bias_backward_element(e, windows, window, heads, dlogits, dtable); });
}

template <class T>
void merge_gather(Device device, int batch, int height, int width, int channels, const T* x, T* out) {
  check_merge(height, width);
  run_over<T>(
      device, "swin patch merging", pixels(batch, height, width), channels,
      [&](auto count) { cuda::merge_gather(count, height, width, channels, x, out); },
      [&](std::int64_t t, int c) { merge_gather_element(t, c, height, width, channels, x, out); });
}

template <class T>
void merge_scatter(Device device, int batch, int height, int width, int channels, const T* merged, T* dx) {
  check_merge(height, width);
  run_over<T>(
      device, "swin patch merging backward", pixels(batch, height, width), channels,
      [&](auto count) { cuda::merge_scatter(count, height, width, channels, merged, dx); },
      [&](std::int64_t t, int c) { merge_scatter_element(t, c, height, width, channels, merged, dx); });
}

#define SKEW_SWIN_KERNELS(T)                                                             \
  template void patchify<T>(Device, int, int, int, int, int, const T*, T*);              \
  template void window_partition<T>(Device, int, int, int, int, int, int, const T*, T*); \
  template void window_reverse<T>(Device, int, int, int, int, int, int, const T*, T*);   \
  template void window_mask<T>(Device, int, int, int, int, T*);                          \
  template void relative_bias<T>(Device, int, int, const T*, T*);                        \
  template void relative_bias_backward<T>(Device, int, int, int, const T*, T*);          \
  template void merge_gather<T>(Device, int, int, int, int, const T*, T*);               \
  template void merge_scatter<T>(Device, int, int, int, int, const T*, T*);
SKEW_SWIN_KERNELS(float)
SKEW_SWIN_KERNELS(double)

#ifndef SKEW_WITH_CUDA
namespace cuda {
void patchify(std::int64_t, int, int, int, int, const float*, float*) {
  SKEW_THROW("swin patchify on CUDA in a build without CUDA");
}
void window_partition(std::int64_t, int, int, int, int, int, const float*, float*) {
  SKEW_THROW("swin window partition on CUDA in a build without CUDA");
}
void window_reverse(std::int64_t, int, int, int, int, int, const float*, float*) {
  SKEW_THROW("swin window reverse on CUDA in a build without CUDA");
}
void window_mask(std::int64_t, int, int, int, int, float*) {
  SKEW_THROW("swin window mask on CUDA in a build without CUDA");
}
void relative_bias(std::int64_t, int, int, const float*, float*) {
  SKEW_THROW("swin relative position bias on CUDA in a build without CUDA");
}
void relative_bias_backward(std::int64_t, int, int, int, const float*, float*) {
  SKEW_THROW("swin relative position bias backward on CUDA in a build without CUDA");
}
void merge_gather(std::int64_t, int, int, int, const float*, float*) {
  SKEW_THROW("swin patch merging on CUDA in a build without CUDA");
}
void merge_scatter(std::int64_t, int, int, int, const float*, float*) {
  SKEW_THROW("swin patch merging backward on CUDA in a build without CUDA");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
