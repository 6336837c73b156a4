// The LM head's top-1 count (the step's accuracy): the rows whose largest logit is at the row's
// target, the first of equal largest logits being the choice (as std::max_element). One SKEW_HD
// row body: the CPU twin runs it row by row, the CUDA kernel one thread per row with an atomic
// count, so that a GPU step reads back one scalar instead of the logits.
#pragma once
#include <cstdint>

#include "core/host_device.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

// 1 when the first largest of row[0, v) is at `target`, else 0.
template <class T>
SKEW_HD inline int top1_hit(int v, const T* row, std::int32_t target) {
  int best = 0;
  for (int j = 1; j < v; ++j)
    if (row[best] < row[j]) best = j;
  return best == target ? 1 : 0;
}

// The rows of logits [rows, v] whose top-1 is their target (targets [rows]), both on `device`.
std::int64_t top1_hits(Device device, std::int64_t rows, int v, const float* logits, const std::int32_t* targets);
// The float64 reference network's count: host only.
std::int64_t top1_hits(Device device, std::int64_t rows, int v, const double* logits, const std::int32_t* targets);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
std::int64_t top1_hits(std::int64_t rows, int v, const float* logits, const std::int32_t* targets);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
