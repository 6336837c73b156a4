// Index arithmetic of the CUDA wide kernels (kernels/cuda/wide_gradient.cu, wide_ffm.cu), kept
// here as host/device functions so that the CPU unit tests check it against brute-force loops
// (tests/unit/test_wide_tile.cpp) even where no GPU runs the kernels.
//  - FFM's field pairs: a sample's n entries have n(n-1)/2 pairs (a < b); the flow kernel
//    numbers them row-major and strides a warp's lanes over that number, so every lane gets the
//    same count (give or take one) instead of entry a's n-1-a pairs (triangular work).
//  - LR/FM's sorted tiles: after the per-tile sort by feature, equal features are contiguous;
//    a warp reduces each run of equal keys inside its 32-entry window (a segmented reduction)
//    and the run's first lane adds the sum to the gradient once.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace skew::kernels {

struct WidePair {
  std::int64_t a, b;  // entry offsets within the sample, a < b
};

SKEW_HD inline std::int64_t wide_pair_count(std::int64_t n) {
  return n * (n - 1) / 2;
}

// Pairs before row a of the row-major enumeration (0,1) (0,2) .. (0,n-1) (1,2) .. (n-2,n-1).
SKEW_HD inline std::int64_t wide_pair_row_start(std::int64_t a, std::int64_t n) {
  return a * (2 * n - a - 1) / 2;
}

// Pair number p (0 <= p < wide_pair_count(n)) of that enumeration. The square root gives the
// row up to rounding; the two loops settle it exactly (at most a step each way).
SKEW_HD inline WidePair wide_pair_of(std::int64_t p, std::int64_t n) {
  const double m = double(2 * n - 1);
  std::int64_t a = std::int64_t((m - sqrt(m * m - 8.0 * double(p))) / 2.0);
  if (a < 0) a = 0;
  if (a > n - 2) a = n - 2;
  while (a > 0 && wide_pair_row_start(a, n) > p) --a;
  while (a < n - 2 && wide_pair_row_start(a + 1, n) <= p) ++a;
  return {a, a + 1 + p - wide_pair_row_start(a, n)};
}

// Key of a lane outside the tile's entries: greater than any feature id, so it never joins a run.
inline constexpr std::uint32_t kWideNoKey = 0xffffffffu;

// Whether lane `lane` of a window of `width` sorted keys begins a run of equal keys (the lane
// that writes the run's sum).
SKEW_HD inline bool wide_run_head(const std::uint32_t* window_keys, int lane) {
  return lane == 0 || window_keys[lane - 1] != window_keys[lane];
}

// Step `offset` of the segmented suffix sum over a window of sorted keys: lane takes the partial
// sum of lane + offset when that lane is inside the window and in the same run.
SKEW_HD inline bool wide_run_takes(const std::uint32_t* window_keys, int width, int lane, int offset) {
  return lane + offset < width && window_keys[lane + offset] == window_keys[lane];
}

}  // namespace skew::kernels
