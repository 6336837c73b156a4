// CUDA twin of kernels/moe_swin.hpp: one thread per output element runs the header's body in a
// grid-stride loop; the element bodies write distinct addresses (the layouts are permutations,
// the bias table's backward owns one entry per thread), so nothing needs an atomic.
#include "kernels/cuda/moe_launch.cuh"
#include "kernels/moe_swin.hpp"

namespace skew::kernels::moe::cuda {
namespace {
__global__ void patchify_kernel(std::int64_t n, int height, int width, int channels, int patch, const float* images,
                                float* patches) {
  SKEW_FOR_EACH_INDEX(i, n) patchify_element(i, height, width, channels, patch, images, patches);
}
__global__ void window_partition_kernel(std::int64_t n, int height, int width, int channels, int window, int shift,
                                        const float* x, float* out) {
  SKEW_FOR_EACH_INDEX(i, n)
  window_partition_element(i / channels, static_cast<int>(i % channels), height, width, channels, window, shift, x,
                           out);
}
__global__ void window_reverse_kernel(std::int64_t n, int height, int width, int channels, int window, int shift,
                                      const float* windows, float* x) {
  SKEW_FOR_EACH_INDEX(i, n)
  window_reverse_element(i / channels, static_cast<int>(i % channels), height, width, channels, window, shift, windows,
                         x);
}
__global__ void window_mask_kernel(std::int64_t n, int height, int width, int window, int shift, float* mask) {
  SKEW_FOR_EACH_INDEX(e, n) window_mask_element(e, height, width, window, shift, mask);
}
__global__ void relative_bias_kernel(std::int64_t n, int window, int heads, const float* table, float* bias) {
  SKEW_FOR_EACH_INDEX(e, n) relative_bias_element(e, window, heads, table, bias);
}
__global__ void relative_bias_backward_kernel(std::int64_t n, int windows, int window, int heads, const float* dlogits,
                                              float* dtable) {
  SKEW_FOR_EACH_INDEX(e, n) relative_bias_backward_element(e, windows, window, heads, dlogits, dtable);
}
__global__ void merge_gather_kernel(std::int64_t n, int height, int width, int channels, const float* x, float* out) {
  SKEW_FOR_EACH_INDEX(i, n)
  merge_gather_element(i / channels, static_cast<int>(i % channels), height, width, channels, x, out);
}
__global__ void merge_scatter_kernel(std::int64_t n, int height, int width, int channels, const float* merged,
                                     float* dx) {
  SKEW_FOR_EACH_INDEX(i, n)
  merge_scatter_element(i / channels, static_cast<int>(i % channels), height, width, channels, merged, dx);
}
}  // namespace

void patchify(std::int64_t n, int height, int width, int channels, int patch, const float* images, float* patches) {
  launch_over(patchify_kernel, n, height, width, channels, patch, images, patches);
}
void window_partition(std::int64_t n, int height, int width, int channels, int window, int shift, const float* x,
                      float* out) {
  launch_over(window_partition_kernel, n, height, width, channels, window, shift, x, out);
}
void window_reverse(std::int64_t n, int height, int width, int channels, int window, int shift, const float* windows,
                    float* x) {
  launch_over(window_reverse_kernel, n, height, width, channels, window, shift, windows, x);
}
void window_mask(std::int64_t n, int height, int width, int window, int shift, float* mask) {
  launch_over(window_mask_kernel, n, height, width, window, shift, mask);
}
void relative_bias(std::int64_t n, int window, int heads, const float* table, float* bias) {
  launch_over(relative_bias_kernel, n, window, heads, table, bias);
}
void relative_bias_backward(std::int64_t n, int windows, int window, int heads, const float* dlogits, float* dtable) {
  launch_over(relative_bias_backward_kernel, n, windows, window, heads, dlogits, dtable);
}
void merge_gather(std::int64_t n, int height, int width, int channels, const float* x, float* out) {
  launch_over(merge_gather_kernel, n, height, width, channels, x, out);
}
void merge_scatter(std::int64_t n, int height, int width, int channels, const float* merged, float* dx) {
  launch_over(merge_scatter_kernel, n, height, width, channels, merged, dx);
}

}  // namespace skew::kernels::moe::cuda
