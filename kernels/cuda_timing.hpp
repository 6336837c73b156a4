// GPU benchmark helpers (CUDA builds only): device upload and event-timed medians, shared by
// the GPU benchmark apps so that every figure is measured the same way.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "lib/core/cuda_check.hpp"

namespace skew::kernels::cuda {

template <typename T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  SKEW_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(1, v.size()) * sizeof(T)));
  SKEW_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// Median milliseconds of `repeats` runs of fn after one warm-up run, timed with CUDA events on
// the default stream.
template <typename Fn>
double median_ms(int repeats, Fn fn) {
  fn();
  SKEW_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  SKEW_CUDA_CHECK(cudaEventCreate(&start));
  SKEW_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    SKEW_CUDA_CHECK(cudaEventRecord(start));
    fn();
    SKEW_CUDA_CHECK(cudaEventRecord(stop));
    SKEW_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    SKEW_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  SKEW_CUDA_CHECK(cudaEventDestroy(start));
  SKEW_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace skew::kernels::cuda
#endif
