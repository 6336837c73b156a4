// Memory checked before the work (issue 38): an app adds up what a run will hold (the model, its
// optimizer state, the data) from its keys, before it allocates or reads any of it, and
// require_memory refuses a run that cannot fit, saying how much it needs, how much there is
// (/proc/meminfo's MemAvailable, or the app's cap key) and which keys lower it. An allocation that
// fails anyway is named: allocating() turns std::bad_alloc into a skew::Error saying what was being
// allocated and its size.
#pragma once
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace skew {

// "1.5 GiB", "12.0 MiB", "3 bytes".
std::string byte_size(double bytes);

// MemAvailable from /proc/meminfo in bytes: what the kernel says can be allocated without
// swapping; -1 where it cannot be read.
std::int64_t available_memory_bytes();

// One part of what a run will hold: what it is ("model: 268435456 features x 1025 floats") and
// its bytes.
struct MemoryPart {
  std::string what;
  double bytes = 0;  // double: a part computed from keys may not fit in 64 bits
};

struct MemoryLimit {
  std::int64_t cap_mb = 0;  // the app's cap key's value; 0 = no cap, MemAvailable alone
  std::string cap_key;      // its name, e.g. "data.max_memory_mb"
  std::string remedy;       // what makes the run smaller, e.g. "lower model.features or model.k"
};

// Throws when the parts add up to more than the cap (when set) or than MemAvailable: the message
// lists each part, the total, what is available and the keys that lower it.
void require_memory(const std::string& app, const std::vector<MemoryPart>& parts, const MemoryLimit& limit);

// Runs `allocate` (a function making the object); a std::bad_alloc from it becomes a skew::Error
// naming `what` and `bytes` (left out when negative: a size not known before the object exists).
template <typename Allocate>
auto allocating(const std::string& what, double bytes, Allocate&& allocate) -> decltype(allocate()) {
  const std::string object = what + (bytes >= 0 ? " (" + byte_size(bytes) + ")" : std::string());
  try {
    return std::forward<Allocate>(allocate)();
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("out of memory allocating " + object);
  } catch (const OutOfMemory& e) {
    throw OutOfMemory("out of memory allocating " + object + ": " + e.what());
  }
}

}  // namespace skew
