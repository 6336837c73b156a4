// Where a CPU kernel puts a scratch row (a linear weight, then k latent floats) that its inner
// loop loads and stores once per entry: with the latent part on a cache line. Wherever malloc
// puts a row, one of the loop's 16-byte accesses to the latent part straddles a line, or a 4 KiB
// page: the FM owners' pass ran 1.5x slower on the thread whose row straddled a page.
#pragma once
#include <cstddef>
#include <cstdint>

namespace skew::kernels {

// Floats of storage a row needs beyond its length for wide_row_with_latent_on_line.
constexpr std::size_t kWideScratchRowSlack = 64 / sizeof(float);

// The first float of `storage` (a row's length plus kWideScratchRowSlack floats) whose next float
// starts a cache line: the row placed there has its latent part line-aligned.
inline float* wide_row_with_latent_on_line(float* storage) {
  const std::uintptr_t latent = reinterpret_cast<std::uintptr_t>(storage + 1);
  const std::uintptr_t aligned = (latent + 63) & ~std::uintptr_t(63);
  return storage + (aligned - latent) / sizeof(float);
}

}  // namespace skew::kernels
