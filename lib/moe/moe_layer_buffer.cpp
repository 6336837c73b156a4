#include "lib/moe/moe_layer_buffer.hpp"

#include <cstring>

#if defined(SKEW_WITH_CUDA)
#include "core/cuda_check.hpp"
#endif

namespace skew::moe::device_memory {

#if defined(SKEW_WITH_CUDA)
void* allocate(std::size_t bytes, const char* what) {
  SKEW_CHECK(cuda_device_count() > 0, what << " on cuda: no CUDA device is visible on this machine");
  void* p = nullptr;
  SKEW_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void release(void* p) {
  if (p) cudaFree(p);
}
void zero(void* p, std::size_t bytes) {
  SKEW_CUDA_CHECK(cudaMemset(p, 0, bytes));
}
void copy(void* dst, const void* src, std::size_t bytes, Device device) {
  if (device == Device::Host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  SKEW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}
#else
void* allocate(std::size_t, const char* what) {
  SKEW_THROW(what << " on cuda in a build without CUDA");
}
void release(void* p) {
  SKEW_CHECK(p == nullptr, "device memory in a build without CUDA");
}
void zero(void*, std::size_t) {
  SKEW_THROW("device memory in a build without CUDA");
}
void copy(void* dst, const void* src, std::size_t bytes, Device device) {
  SKEW_CHECK(device == Device::Host, "device memory in a build without CUDA");
  std::memcpy(dst, src, bytes);
}
#endif

}  // namespace skew::moe::device_memory
