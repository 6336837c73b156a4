#include "core/device_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/error.hpp"

#ifdef SKEW_WITH_CUDA
#include "core/cuda_check.hpp"
#endif

namespace skew::device_memory {

namespace {

std::size_t rounded(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + 511) / 512 * 512;
}

#ifdef SKEW_WITH_CUDA
int current_device() {
  int device = 0;
  SKEW_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

cudaError_t cuda_allocate(Kind kind, void** p, std::size_t bytes) {
  return kind == Kind::Pinned ? cudaMallocHost(p, bytes) : cudaMalloc(p, bytes);
}

void cuda_free(Kind kind, void* p) {
  if (kind == Kind::Pinned)
    cudaFreeHost(p);
  else
    cudaFree(p);
}

// Free blocks by (kind, CUDA device, rounded size). Never destroyed: blocks still cached at exit
// go back with the process, not through a CUDA runtime that may already be torn down.
class BlockCache {
 public:
  void* take(Kind kind, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find({kind, current_device(), bytes});
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    return p;
  }
  void put(Kind kind, int device, void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[{kind, device, bytes}].push_back(p);
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, blocks] : free_)
      for (void* p : blocks) cuda_free(std::get<0>(key), p);
    free_.clear();
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const auto& [key, blocks] : free_) n += blocks.size();
    return n;
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<Kind, int, std::size_t>, std::vector<void*>> free_;
};

BlockCache& cache() {
  static BlockCache* blocks = new BlockCache;
  return *blocks;
}

void* allocate_cuda(Kind kind, std::size_t bytes, const char* what) {
  SKEW_CHECK(kind == Kind::Pinned || cuda_device_count() > 0,
             what << " on cuda: no CUDA device is visible on this machine");
  if (void* p = cache().take(kind, bytes)) return p;
  void* p = nullptr;
  if (cuda_allocate(kind, &p, bytes) != cudaSuccess) {  // out of memory: give the cache back, retry
    (void)cudaGetLastError();
    cache().clear();
    SKEW_CUDA_CHECK(cuda_allocate(kind, &p, bytes));
  }
  return p;
}
#endif

}  // namespace

Kind kind_of(Device device, bool pinned) {
  if (device == Device::Cuda) return Kind::Cuda;
  return pinned ? Kind::Pinned : Kind::Host;
}

void* allocate(Kind kind, std::size_t bytes, const char* what) {
  bytes = rounded(bytes);
  if (kind == Kind::Host) {
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr)
      throw OutOfMemory("out of host memory allocating " + std::to_string(bytes) + " bytes for " + std::string(what));
    return p;
  }
#ifdef SKEW_WITH_CUDA
  return allocate_cuda(kind, bytes, what);
#else
  SKEW_THROW(what << (kind == Kind::Cuda ? " on cuda" : " in pinned memory") << " in a build without CUDA");
#endif
}

void release(Kind kind, void* p, std::size_t bytes) {
  if (p == nullptr) return;
  if (kind == Kind::Host) {
    std::free(p);
    return;
  }
#ifdef SKEW_WITH_CUDA
  int device = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();  // the runtime is shutting down: the process takes the block back
    return;
  }
  cache().put(kind, device, p, rounded(bytes));
#else
  (void)bytes;
#endif
}

void zero(void* p, std::size_t bytes, Device device) {
  if (bytes == 0) return;
  if (device == Device::Host) {
    std::memset(p, 0, bytes);
    return;
  }
#ifdef SKEW_WITH_CUDA
  SKEW_CUDA_CHECK(cudaMemset(p, 0, bytes));
#endif
}

void release_cached() {
#ifdef SKEW_WITH_CUDA
  cache().clear();
#endif
}

std::size_t cached_blocks() {
#ifdef SKEW_WITH_CUDA
  return cache().size();
#else
  return 0;
#endif
}

}  // namespace skew::device_memory
