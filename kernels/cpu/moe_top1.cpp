// CPU twin of kernels/moe_top1.hpp.
#include "kernels/moe_top1.hpp"

#include "core/error.hpp"
#include "kernels/dispatch.hpp"

namespace skew::kernels::moe {

namespace {
template <class T>
std::int64_t host_top1_hits(std::int64_t rows, int v, const T* logits, const std::int32_t* targets) {
  std::int64_t hits = 0;
  for (std::int64_t r = 0; r < rows; ++r) hits += top1_hit(v, logits + r * v, targets[r]);
  return hits;
}
}  // namespace

std::int64_t top1_hits(Device device, std::int64_t rows, int v, const float* logits, const std::int32_t* targets) {
  SKEW_ON_CUDA(device, "top-1 count", cuda::top1_hits(rows, v, logits, targets));
  return host_top1_hits(rows, v, logits, targets);
}

std::int64_t top1_hits(Device device, std::int64_t rows, int v, const double* logits, const std::int32_t* targets) {
  SKEW_CHECK(device == Device::Host, "the float64 top-1 count runs on the host only");
  return host_top1_hits(rows, v, logits, targets);
}

}  // namespace skew::kernels::moe
