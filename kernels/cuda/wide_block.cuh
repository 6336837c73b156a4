// Device helpers the wide CUDA kernels share (kernels/cuda/wide_gradient.cu, wide_ffm.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/wide_flow.hpp"

namespace skew::kernels {

inline constexpr int kWideWarp = 32;

// Adds the sum over the block of every thread's `v` to *dst with one global atomic (the bias
// gradient: every sample adds to the same float, so per-sample atomics would serialise on one
// address). Warp shuffles, one partial per warp in shared memory, the first warp adds those.
// Every thread of the block must call it (it synchronises); blockDim.x a multiple of 32.
__device__ inline void wide_block_sum_to(float v, float* dst) {
  __shared__ float warp_sums[1024 / kWideWarp];
  for (int offset = kWideWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % kWideWarp, warp = threadIdx.x / kWideWarp;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x) / kWideWarp ? warp_sums[lane] : 0.0f;
    for (int offset = kWideWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) atomicAdd(dst, v);
  }
}

// Host: logs `message` (at INFO) the first time this process sees it; for the launch choices
// the kernels make for a setting (a tile or cache size they cannot hold), which a training run
// would otherwise repeat every step.
void wide_log_once(const std::string& message);

// Host: the flow kernels' tile (at most max_tile samples) and number of cached hot features (at
// most `fit`, the rows `budget` bytes of shared memory hold) for the requested options; where
// either is smaller than asked it says so once, naming the config keys. `model` names the kernel.
int wide_cuda_tile(const WideFlowOptions& options, int max_tile, const char* model);
int wide_cuda_hot(const WideShape& shape, const WideFlowOptions& options, std::int64_t fit, std::size_t budget,
                  const char* model);

}  // namespace skew::kernels
