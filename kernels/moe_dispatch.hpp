// Index kernels of MoE dispatch: count assignments per bin (bin = destination rank x expert, or
// local expert), exclusive scan of the counts into block offsets, and the stable position of
// every assignment inside its bin's block, which permutes tokens into expert-contiguous order
// (a counting sort; the CUDA twin uses CUB DeviceHistogram, DeviceScan and DeviceRadixSort).
// Pointers are host or device memory as `device` says; keys lie in [0, bins).
#pragma once
#include <cstdint>

#include "core/tensor.hpp"

namespace skew::kernels::moe {

// counts[b] = #{i : keys[i] == b}
void histogram(Device device, const std::int32_t* keys, std::int64_t n, int bins, std::int64_t* counts);
// out[i] = sum of in[0..i)
void exclusive_scan(Device device, const std::int64_t* in, int n, std::int64_t* out);
// pos[i] = offsets[keys[i]] + #{j < i : keys[j] == keys[i]}  (stable; offsets may leave gaps
// for padding)
void stable_positions(Device device, const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos);
// out[pos[i]] = in[i] for rows of `width` floats (scatter into permuted order)
void scatter_rows(Device device, const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void histogram(const std::int32_t* keys, std::int64_t n, int bins, std::int64_t* counts);
void exclusive_scan(const std::int64_t* in, int n, std::int64_t* out);
void stable_positions(const std::int32_t* keys, std::int64_t n, int bins, const std::int64_t* offsets,
                      std::int64_t* pos);
void scatter_rows(const float* in, const std::int64_t* pos, std::int64_t n, int width, float* out);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
