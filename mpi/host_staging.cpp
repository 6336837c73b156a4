#include "mpi/host_staging.hpp"

#include <algorithm>

#include "core/error.hpp"

#ifdef SKEW_WITH_CUDA
#include "core/cuda_check.hpp"
#endif

namespace skew::comm {

#ifdef SKEW_WITH_CUDA
namespace {
void* cuda_allocate_pinned(std::size_t bytes) {
  void* p = nullptr;
  SKEW_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void cuda_free_pinned(void* p) {
  cudaFreeHost(p);
}
void cuda_to_host(void* host, const void* device, std::size_t bytes) {
  SKEW_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}
void cuda_to_device(void* device, const void* host, std::size_t bytes) {
  SKEW_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
}
constexpr DeviceCopies kCudaCopies{cuda_allocate_pinned, cuda_free_pinned, cuda_to_host, cuda_to_device};
}  // namespace

const DeviceCopies* cuda_copies() {
  return &kCudaCopies;
}
#else
const DeviceCopies* cuda_copies() {
  return nullptr;
}
#endif

StagingPool::~StagingPool() {
  for (const Block& b : blocks_) copies_.free_pinned(b.data);
}

StagingPool::Lease::~Lease() {
  if (pool_) pool_->give_back(block_);
}

StagingPool::Lease StagingPool::lease(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The smallest free block that fits; else the largest free block grows; else a new block.
  std::size_t best = blocks_.size(), largest_free = blocks_.size();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.leased) continue;
    if (b.bytes >= bytes && (best == blocks_.size() || b.bytes < blocks_[best].bytes)) best = i;
    if (largest_free == blocks_.size() || b.bytes > blocks_[largest_free].bytes) largest_free = i;
  }
  if (best == blocks_.size()) {
    if (largest_free == blocks_.size()) {
      blocks_.emplace_back();
      largest_free = blocks_.size() - 1;
    }
    Block& b = blocks_[largest_free];
    // At least double, so a slowly growing message reallocates O(log size) times.
    const std::size_t grown = std::max({bytes, 2 * b.bytes, std::size_t{1} << 16});
    copies_.free_pinned(b.data);
    b.data = nullptr;
    b.bytes = 0;
    b.data = copies_.allocate_pinned(grown);
    b.bytes = grown;
    ++allocations_;
    best = largest_free;
  }
  blocks_[best].leased = true;
  return Lease(shared_from_this(), best, blocks_[best].data);
}

void StagingPool::give_back(std::size_t block) {
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_[block].leased = false;
}

std::size_t StagingPool::allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocations_;
}

std::size_t StagingPool::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t total = 0;
  for (const Block& b : blocks_) total += b.bytes;
  return total;
}

Buffer StagedBuffers::stage(const Buffer& b, bool read, bool written) {
  SKEW_CHECK(b.count == 0 || b.data != nullptr, op_ << ": null buffer with " << b.count << " elements");
  if (b.device == Device::Host) return b;
  SKEW_CHECK(pool_ != nullptr, op_ << ": buffer is on " << device_name(b.device)
                                   << " but this build has no CUDA; the MPI backend takes host buffers");
  const std::size_t bytes = b.count * dtype_size(b.dtype);
  if (bytes == 0) return {nullptr, 0, b.dtype, Device::Host};
  StagingPool::Lease lease = pool_->lease(bytes);
  const Buffer host{lease.data(), b.count, b.dtype, Device::Host};
  if (read) pool_->copies().to_host(host.data, b.data, bytes);
  staged_.push_back({b, host, std::move(lease), written});
  return host;
}

void StagedBuffers::finish() {
  for (Staged& s : staged_)
    if (s.written) pool_->copies().to_device(s.device.data, s.host.data, s.host.count * dtype_size(s.host.dtype));
  staged_.clear();  // the leases end: the blocks return to the pool
}

}  // namespace skew::comm
