#include "kernels/moe_dispatch.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "kernels/dispatch.hpp"

namespace skew::kernels::moe {

void histogram(Device device, const std::int32_t* keys, std::int64_t n, int bins, std::int64_t* counts) {
  SKEW_ON_CUDA(device, "moe histogram", cuda::histogram(keys, n, bins, counts));
  std::fill(counts, counts + bins, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    SKEW_CHECK(keys[i] >= 0 && keys[i] < bins, "moe histogram: key " << keys[i] << " outside [0, " << bins << ")");
    ++counts[keys[i]];
  }
}

void exclusive_scan(Device device, const std::int64_t* in, int n, std::int64_t* out) {
  SKEW_ON_CUDA(device, "moe scan", cuda::exclusive_scan(in, n, out));
  std::int64_t acc = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t v = in[i];
    out[i] = acc;
    acc += v;
  }
}

void stable_positions(Device device, const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos) {
  SKEW_ON_CUDA(device, "moe permutation", cuda::stable_positions(keys, n, bins, offsets, pos));
  std::vector<std::int64_t> next(offsets, offsets + bins);
  for (std::int64_t i = 0; i < n; ++i) pos[i] = next[static_cast<std::size_t>(keys[i])]++;
}

void scatter_rows(Device device, const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out) {
  SKEW_ON_CUDA(device, "moe scatter", cuda::scatter_rows(in, pos, n, width, out));
  for (std::int64_t i = 0; i < n; ++i) std::copy(in + i * width, in + (i + 1) * width, out + pos[i] * width);
}

}  // namespace skew::kernels::moe
