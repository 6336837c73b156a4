// GPU benchmark timing (CUDA builds only): event-timed medians and the device copy bandwidth,
// shared by the GPU benchmark apps so that every figure is measured the same way.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/device_array.hpp"

namespace skew::kernels::cuda {

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

// Device-to-device copy bandwidth, bytes read + written per second, over a buffer of `bytes`
// (1 GiB or more, so that no cache holds it): the bound the benchmarks' figures are set against.
inline double device_copy_bandwidth(std::size_t bytes, int repeats) {
  DeviceArray<char> a(Device::Cuda), b(Device::Cuda);
  a.resize_for_overwrite(bytes);
  b.resize_for_overwrite(bytes);
  SKEW_CUDA_CHECK(cudaMemset(a.data(), 1, bytes));
  const double ms = median_ms(
      repeats, [&] { SKEW_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice)); });
  return 2.0 * double(bytes) / (ms * 1e-3);
}

}  // namespace skew::kernels::cuda
#endif
