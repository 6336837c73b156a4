// The heap a test's objects hold, counted by glibc, and the check that a memory estimate is within
// a factor of 2 of it (the estimates count tensors, not the allocator's rounding and bookkeeping).
#pragma once
#include <malloc.h>

#include <catch2/catch.hpp>

namespace skew::test {

// Bytes in use: small blocks from the arenas plus large mmap'ed ones.
inline double heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return double(m.uordblks) + double(m.hblkhd);
}

inline void check_estimate_within_factor_two(double held, double estimate) {
  CAPTURE(held, estimate);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator replaces glibc's, whose mallinfo2 then counts nothing.
  WARN("an ASan build: glibc's heap count does not see the allocations; the total is not compared");
  return;
#endif
  CHECK(held > estimate / 2);
  CHECK(held < estimate * 2);
}

}  // namespace skew::test
