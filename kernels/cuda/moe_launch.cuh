// Launch shape shared by the MoE layer's CUDA twins (moe_route.cu, moe_gate.cu): a grid-stride
// loop over n indices in blocks of 256, at most 65536 blocks, and no launch for an empty range.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"

namespace skew::kernels::moe::cuda {

constexpr int kLaunchBlock = 256;

#define SKEW_FOR_EACH_INDEX(i, n)                                                     \
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t(gridDim.x) * blockDim.x)

// kernel<<<...>>>(n, args...) over n indices, its launch checked.
template <class Kernel, class... Args>
void launch_over(Kernel kernel, std::int64_t n, Args... args) {
  if (n <= 0) return;
  const auto grid = std::min<std::int64_t>((n + kLaunchBlock - 1) / kLaunchBlock, std::int64_t(1) << 16);
  kernel<<<static_cast<int>(grid), kLaunchBlock>>>(n, args...);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels::moe::cuda
