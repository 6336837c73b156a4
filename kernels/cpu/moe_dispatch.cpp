#include "kernels/moe_dispatch.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace skew::kernels::moe {

void histogram(Device device, const std::int32_t* keys, std::int64_t n, int bins, std::int64_t* counts) {
  if (device == Device::Cuda) return cuda::histogram(keys, n, bins, counts);
  std::fill(counts, counts + bins, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    SKEW_CHECK(keys[i] >= 0 && keys[i] < bins, "moe histogram: key " << keys[i] << " outside [0, " << bins << ")");
    ++counts[keys[i]];
  }
}

void exclusive_scan(Device device, const std::int64_t* in, int n, std::int64_t* out) {
  if (device == Device::Cuda) return cuda::exclusive_scan(in, n, out);
  std::int64_t acc = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t v = in[i];
    out[i] = acc;
    acc += v;
  }
}

void stable_positions(Device device, const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos) {
  if (device == Device::Cuda) return cuda::stable_positions(keys, n, bins, offsets, pos);
  std::vector<std::int64_t> next(offsets, offsets + bins);
  for (std::int64_t i = 0; i < n; ++i) pos[i] = next[static_cast<std::size_t>(keys[i])]++;
}

void scatter_rows(Device device, const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out) {
  if (device == Device::Cuda) return cuda::scatter_rows(in, pos, n, width, out);
  for (std::int64_t i = 0; i < n; ++i) std::copy(in + i * width, in + (i + 1) * width, out + pos[i] * width);
}

#ifndef SKEW_WITH_CUDA
namespace cuda {
void histogram(const std::int32_t*, std::int64_t, int, std::int64_t*) {
  SKEW_THROW("moe histogram on CUDA in a build without CUDA");
}
void exclusive_scan(const std::int64_t*, int, std::int64_t*) {
  SKEW_THROW("moe scan on CUDA in a build without CUDA");
}
void stable_positions(const std::int32_t*, std::int64_t, int, const std::int64_t*, std::int64_t*) {
  SKEW_THROW("moe permutation on CUDA in a build without CUDA");
}
void scatter_rows(const float*, const std::int64_t*, std::int64_t, int, float*) {
  SKEW_THROW("moe scatter on CUDA in a build without CUDA");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
