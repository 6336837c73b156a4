// A stand-in for device memory on a machine without a GPU: host memory labelled Device::Cuda,
// and DeviceCopies that allocate "pinned" blocks with malloc and copy with memcpy, counting
// bytes and allocations. The MPI backend stages such buffers exactly as it stages GPU buffers,
// so the staging logic (what is copied in, what back, when) runs under mpirun here.
#pragma once
#include <cstdlib>
#include <cstring>
#include <vector>

#include "mpi/host_staging.hpp"

namespace skew::comm::fake {

struct Counters {
  std::size_t allocations = 0, to_host_bytes = 0, to_device_bytes = 0;
};
inline Counters counters;

inline void* allocate(std::size_t bytes) {
  ++counters.allocations;
  return std::malloc(bytes);
}
inline void release(void* p) {
  std::free(p);
}
inline void to_host(void* host, const void* device, std::size_t bytes) {
  counters.to_host_bytes += bytes;
  std::memcpy(host, device, bytes);
}
inline void to_device(void* device, const void* host, std::size_t bytes) {
  counters.to_device_bytes += bytes;
  std::memcpy(device, host, bytes);
}
inline const DeviceCopies copies{allocate, release, to_host, to_device};

// `v` as a device buffer.
template <typename T>
Buffer device_view(std::vector<T>& v) {
  Buffer b = view(v);
  b.device = Device::Cuda;
  return b;
}

}  // namespace skew::comm::fake
