// CUDA twin of kernels/moe_top1.hpp: one thread per row runs the row body over the row's v
// logits (a vocabulary of a few thousand is a few microseconds; the head's GEMM dwarfs it) and
// adds its hit to one counter in grow-only scratch, which comes back as the step's one scalar.
#include "kernels/cuda/moe_launch.cuh"
#include "kernels/cuda/scratch.hpp"
#include "kernels/moe_top1.hpp"

namespace skew::kernels::moe::cuda {
namespace {
__global__ void top1_hits_kernel(std::int64_t rows, int v, const float* logits, const std::int32_t* targets,
                                 unsigned long long* hits) {
  SKEW_FOR_EACH_INDEX(r, rows) {
    if (top1_hit(v, logits + r * v, targets[r])) atomicAdd(hits, 1ULL);
  }
}
}  // namespace

std::int64_t top1_hits(std::int64_t rows, int v, const float* logits, const std::int32_t* targets) {
  if (rows <= 0 || v <= 0) return 0;
  thread_local DeviceArray<char> scratch(Device::Cuda);
  auto* hits = static_cast<unsigned long long*>(scratch_slices(scratch, {sizeof(unsigned long long)})[0]);
  SKEW_CUDA_CHECK(cudaMemset(hits, 0, sizeof(unsigned long long)));
  launch_over(top1_hits_kernel, rows, v, logits, targets, hits);
  unsigned long long host = 0;
  SKEW_CUDA_CHECK(cudaMemcpy(&host, hits, sizeof host, cudaMemcpyDeviceToHost));
  return static_cast<std::int64_t>(host);
}

}  // namespace skew::kernels::moe::cuda
