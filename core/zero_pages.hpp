// An allocator for large arrays that start at zero and are written sparsely (a model-sized
// gradient): the memory comes straight from the kernel as anonymous pages, which read as zero
// until first written, and its vectors skip the zero fill that std::vector<T>(n) would write.
// Such a vector costs no page fault at construction, and later only one per page actually
// touched (a frequency-renumbered model touches its first rows only). Plain malloc cannot
// promise this: it may hand back recycled heap memory, which must be cleared.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace skew {

// `HugePages`: whether arrays of 2 MiB and more ask the kernel for 2 MiB pages (see allocate).
template <typename T, bool HugePages = true>
struct ZeroPageAllocator {
  static_assert(std::is_trivial_v<T>, "zero pages stand for zero values of trivial types only");
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = ZeroPageAllocator<U, HugePages>;
  };
  static constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;
  ZeroPageAllocator() = default;
  template <typename U>
  ZeroPageAllocator(const ZeroPageAllocator<U, HugePages>&) {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // Large arrays (a model's optimizer state) are read before their first write: each 4 KiB
    // page would fault twice (the zero page mapped, then copied on write), and with several
    // threads every copy flushes the other cores' TLBs (an interprocessor interrupt each: a
    // tenth of a 2-thread FFM epoch). Huge pages cut the faults 512-fold and the TLB misses of
    // random rows. Advice only: where the kernel has none to give, 4 KiB pages serve. An array
    // written once where scattered rows need it and left zero elsewhere opts out (HugePages =
    // false): a huge page would fault 2 MiB around each such row.
    if (HugePages && bytes >= kHugePageBytes) ::madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) { ::munmap(p, n * sizeof(T)); }
  // Value-initialisation (resize(n), vector(n)) leaves the zero the fresh pages already hold.
  template <typename U>
  void construct(U*) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const ZeroPageAllocator&, const ZeroPageAllocator&) { return true; }
};

// Zero-initialised by resize() or construction with a size; only vectors built fresh are zero
// for free (a resize that grows a used vector copies its elements into fresh pages, which is
// still correct).
template <typename T, bool HugePages = true>
using ZeroPageVector = std::vector<T, ZeroPageAllocator<T, HugePages>>;

}  // namespace skew
