// Device buffers through MPI: MPI here is not CUDA-aware, so a device buffer is copied into a
// pinned host block before the call and back after it. The blocks come from a grow-only pool
// (page-locked memory is allocated when no free block is large enough and kept for later calls),
// so a steady training step allocates nothing. Host buffers pass through untouched.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "mpi/process_group.hpp"

namespace skew::comm {

// How a staging pool reaches device memory. The CUDA build's functions (cuda_copies()) allocate
// page-locked memory and copy with cudaMemcpy, which runs after everything already enqueued on
// the legacy default stream (where skew's kernels launch) and returns when the copy is done.
struct DeviceCopies {
  void* (*allocate_pinned)(std::size_t bytes);
  void (*free_pinned)(void* p);
  void (*to_host)(void* host, const void* device, std::size_t bytes);
  void (*to_device)(void* device, const void* host, std::size_t bytes);
};
// The CUDA functions, or nullptr in a build without CUDA (device buffers are then refused).
const DeviceCopies* cuda_copies();

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  explicit StagingPool(const DeviceCopies& copies) : copies_(copies) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A pinned block of at least `bytes`, the pool's until the lease ends.
  class Lease {
   public:
    Lease(std::shared_ptr<StagingPool> pool, std::size_t block, void* data)
        : pool_(std::move(pool)), block_(block), data_(data) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    void* data() const { return data_; }

   private:
    std::shared_ptr<StagingPool> pool_;
    std::size_t block_;
    void* data_;
  };
  Lease lease(std::size_t bytes);

  const DeviceCopies& copies() const { return copies_; }
  // Page-locked allocations so far (each one a block made or grown): flat across repeated calls.
  std::size_t allocations() const;
  std::size_t pinned_bytes() const;

 private:
  struct Block {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool leased = false;
  };
  void give_back(std::size_t block);
  DeviceCopies copies_;
  mutable std::mutex mutex_;
  std::vector<Block> blocks_;
  std::size_t allocations_ = 0;
};

// The host views of one call's buffers. A host buffer is returned as it is; a device buffer is
// replaced by a pinned block, holding its values when the call reads it (read, read_write), and
// copied back to it by finish() when the call writes it (write, read_write). `pool` is null in a
// build without CUDA, where a device buffer is an error naming `op`.
class StagedBuffers {
 public:
  StagedBuffers(StagingPool* pool, const char* op) : pool_(pool), op_(op) {}
  Buffer read(const Buffer& b) { return stage(b, true, false); }
  Buffer write(const Buffer& b) { return stage(b, false, true); }
  Buffer read_write(const Buffer& b) { return stage(b, true, true); }
  // Copies the written blocks back to their device buffers (once; later calls do nothing).
  void finish();

 private:
  Buffer stage(const Buffer& b, bool read, bool written);
  struct Staged {
    Buffer device, host;
    StagingPool::Lease lease;
    bool written;
  };
  StagingPool* pool_;
  const char* op_;
  std::vector<Staged> staged_;
};

}  // namespace skew::comm
