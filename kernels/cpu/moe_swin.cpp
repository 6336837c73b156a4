// CPU twin of kernels/moe_swin.hpp: each op checks its shapes, then runs its element body over
// the output's index space in order (or hands the same index space to the CUDA twin).
#include "kernels/moe_swin.hpp"

#include "core/error.hpp"
#include "kernels/dispatch.hpp"

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

// Runs element(r, c) for the rows r in [0, rows) and columns c in [0, columns) on the host, in
// order: the index space the CUDA twin covers with rows * columns threads.
template <class Element>
void for_each_element(std::int64_t rows, int columns, Element element) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) element(r, c);
}
}  // namespace

template <class T>
void patchify(Device device, int batch, int height, int width, int channels, int patch, const T* images, T* patches) {
  SKEW_CHECK(patch > 0 && height % patch == 0 && width % patch == 0,
             "patch size " << patch << " does not tile the " << height << " x " << width << " image");
  SKEW_ON_CUDA_FLOAT(
      T, device, "swin patchify",
      cuda::patchify(pixels(batch, height, width) * channels, height, width, channels, patch, images, patches));
  for_each_element(pixels(batch, height, width) * channels, 1,
                   [&](std::int64_t i, int) { patchify_element(i, height, width, channels, patch, images, patches); });
}

template <class T>
void window_partition(Device device, int batch, int height, int width, int channels, int window, int shift, const T* x,
                      T* out) {
  check_windows(height, width, window, shift);
  SKEW_ON_CUDA_FLOAT(
      T, device, "swin window partition",
      cuda::window_partition(pixels(batch, height, width) * channels, height, width, channels, window, shift, x, out));
  for_each_element(pixels(batch, height, width), channels, [&](std::int64_t t, int c) {
    window_partition_element(t, c, height, width, channels, window, shift, x, out);
  });
}

template <class T>
void window_reverse(Device device, int batch, int height, int width, int channels, int window, int shift,
                    const T* windows, T* x) {
  check_windows(height, width, window, shift);
  SKEW_ON_CUDA_FLOAT(T, device, "swin window reverse",
                     cuda::window_reverse(pixels(batch, height, width) * channels, height, width, channels, window,
                                          shift, windows, x));
  for_each_element(pixels(batch, height, width), channels, [&](std::int64_t t, int c) {
    window_reverse_element(t, c, height, width, channels, window, shift, windows, x);
  });
}

template <class T>
void window_mask(Device device, int height, int width, int window, int shift, T* mask) {
  check_windows(height, width, window, shift);
  const std::int64_t N = std::int64_t(window) * window, n = std::int64_t(height / window) * (width / window) * N * N;
  SKEW_ON_CUDA_FLOAT(T, device, "swin window mask", cuda::window_mask(n, height, width, window, shift, mask));
  for_each_element(n, 1, [&](std::int64_t e, int) { window_mask_element(e, height, width, window, shift, mask); });
}

template <class T>
void relative_bias(Device device, int window, int heads, const T* table, T* bias) {
  const std::int64_t N = std::int64_t(window) * window, n = heads * N * N;
  SKEW_ON_CUDA_FLOAT(T, device, "swin relative position bias", cuda::relative_bias(n, window, heads, table, bias));
  for_each_element(n, 1, [&](std::int64_t e, int) { relative_bias_element(e, window, heads, table, bias); });
}

template <class T>
void relative_bias_backward(Device device, int windows, int window, int heads, const T* dlogits, T* dtable) {
  const std::int64_t n = std::int64_t(2 * window - 1) * (2 * window - 1) * heads;
  SKEW_ON_CUDA_FLOAT(T, device, "swin relative position bias backward",
                     cuda::relative_bias_backward(n, windows, window, heads, dlogits, dtable));
  for_each_element(
      n, 1, [&](std::int64_t e, int) { relative_bias_backward_element(e, windows, window, heads, dlogits, dtable); });
}

template <class T>
void merge_gather(Device device, int batch, int height, int width, int channels, const T* x, T* out) {
  check_merge(height, width);
  SKEW_ON_CUDA_FLOAT(T, device, "swin patch merging",
                     cuda::merge_gather(pixels(batch, height, width) * channels, height, width, channels, x, out));
  for_each_element(pixels(batch, height, width), channels,
                   [&](std::int64_t t, int c) { merge_gather_element(t, c, height, width, channels, x, out); });
}

template <class T>
void merge_scatter(Device device, int batch, int height, int width, int channels, const T* merged, T* dx) {
  check_merge(height, width);
  SKEW_ON_CUDA_FLOAT(T, device, "swin patch merging backward",
                     cuda::merge_scatter(pixels(batch, height, width) * channels, height, width, channels, merged, dx));
  for_each_element(pixels(batch, height, width), channels,
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

}  // namespace skew::kernels::moe
