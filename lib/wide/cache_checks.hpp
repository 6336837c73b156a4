// The binary cache's element checks and error messages (lib/wide/cache.cpp and
// cache_pass.cpp): internal to those two files.
#pragma once
#include <bit>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "lib/wide/cache.hpp"

namespace skew::wide::cache_checks {

[[noreturn]] inline void corrupt(const std::string& cache, const std::string& why) {
  SKEW_THROW("corrupt data cache " << cache << ": " << why << " (delete it to re-parse)");
}

template <typename... Parts>
std::string say(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// Copies of a cache's arrays are checked element by element. A block is first tested branch-free
// (the loop vectorises: an unsigned sum of the verdicts, each element compared in its own width),
// and only a block with a bad element is walked again to name the first: a test that stops at
// the first bad element does not vectorise, and took about a quarter of a load's read.
template <typename T, typename Bad>
bool any_bad(const T* v, std::size_t n, Bad bad) {
  unsigned found = 0;
  for (std::size_t i = 0; i < n; ++i) found |= unsigned(bad(v[i]));
  return found != 0;
}
// Closures, not functions: any_bad inlines a closure's call, not a call through a pointer.
inline constexpr auto label_bad = [](float y) { return (y != 0.0f) & (y != 1.0f); };
// Not finite: all exponent bits set.
inline constexpr auto value_bad = [](float v) {
  return (std::bit_cast<std::uint32_t>(v) & 0x7f800000u) == 0x7f800000u;
};
// A feature id beyond the header's features (at most 2^32 - 1 of them, open() checks).
inline auto index_bad(const CacheHeader& h) {
  const std::uint32_t last = std::uint32_t(h.num_features - 1);
  const bool none = h.num_features == 0;
  return [=](std::uint32_t i) { return none | (i > last); };
}
// A field beyond the header's fields (1 to 65536 of them, open() checks).
inline auto field_bad(const CacheHeader& h) {
  const std::uint16_t last = std::uint16_t(h.num_fields - 1);
  return [=](std::uint16_t f) { return f > last; };
}

}  // namespace skew::wide::cache_checks
