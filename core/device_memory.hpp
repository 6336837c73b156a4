// The memory behind skew::DeviceArray (core/device_array.hpp): host memory (plain, 64-byte
// aligned, or page-locked for asynchronous copies) and CUDA device memory, the last two through a
// caching allocator. A released CUDA or pinned block goes to a cache keyed by its device and its
// size (rounded up to 512 bytes) and is handed out again for the same size, so a step loop of
// steady shapes neither allocates nor frees after its first step: cudaMalloc and cudaFree
// synchronise the device and cost more than the small kernels they would feed. Thread-safe.
#pragma once
#include <cstddef>

#include "core/tensor.hpp"

namespace skew::device_memory {

enum class Kind { Host, Pinned, Cuda };

Kind kind_of(Device device, bool pinned);
// `bytes` (at least one) of memory of `kind`; `what` names the buffer in an error (no CUDA in this
// build, no device visible, out of memory).
void* allocate(Kind kind, std::size_t bytes, const char* what);
// Gives back a block from allocate(kind, bytes). A device or pinned block waits for the device's
// queued work first (as cudaFree would), so that its next user never races the last one.
void release(Kind kind, void* p, std::size_t bytes);
// Zeroes `bytes` at p on `device`.
void zero(void* p, std::size_t bytes, Device device);
// Frees every cached block (the cache refills on demand); called when an allocation runs out of
// device memory, and by tests.
void release_cached();
// The number of CUDA and pinned blocks the cache holds now (tests).
std::size_t cached_blocks();

}  // namespace skew::device_memory
