// Device scratch of a kernel wrapper: a DeviceArray<char> on Cuda (thread_local in the wrapper,
// one per wrapper and thread) carved into aligned slices on every call. The array grows only, so a
// steady step loop allocates nothing; a slice stays valid until the wrapper's next call, which is
// ordered after this one on the same stream.
#pragma once
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "core/device_array.hpp"

namespace skew::kernels {

// Room in `scratch` for slices of these sizes in bytes; their addresses, in order, each 256-byte
// aligned (the contents are the caller's to fill).
inline std::vector<void*> scratch_slices(DeviceArray<char>& scratch, std::initializer_list<std::size_t> sizes) {
  const auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  std::size_t total = 0;
  for (std::size_t bytes : sizes) total += aligned(bytes);
  scratch.resize_for_overwrite(std::max<std::size_t>(total, 1));
  std::vector<void*> out;
  std::size_t offset = 0;
  for (std::size_t bytes : sizes) {
    out.push_back(scratch.data() + offset);
    offset += aligned(bytes);
  }
  return out;
}

}  // namespace skew::kernels
