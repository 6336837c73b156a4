// The binary cache's checked reads (lib/wide/cache.hpp): one pass over the payload that sums
// its CRC-32C while it copies and checks the arrays (CacheFile::read_checked), or only sums it
// (CacheFile::payload_intact).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>
#include <type_traits>

#include "core/checksum.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/cache_checks.hpp"

namespace skew::wide {

using cache_checks::any_bad;
using cache_checks::corrupt;
using cache_checks::field_bad;
using cache_checks::index_bad;
using cache_checks::label_bad;
using cache_checks::say;
using cache_checks::value_bad;

namespace {

// One pass over a cache's payload in file order, through a read-only mapping: every byte is
// summed into the CRC-32C, and the bytes copied out are copied block by block right after their
// sum, while the block is in the core's cache (the file is read from memory once). Each block's
// pages are let go once passed, so the process's resident memory holds 2 MB of the file.
class PayloadPass {
 public:
  // A pass from byte `from` (the payload's first by default) of a file of `bytes` bytes.
  PayloadPass(const std::string& path, int fd, std::uint64_t bytes, std::uint64_t from = sizeof(CacheHeader))
      : bytes_(bytes), at_(from), released_(from - from % kRelease) {
    void* mapped = ::mmap(nullptr, std::size_t(bytes), PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) corrupt(path, say("cannot map it: ", std::strerror(errno)));
    base_ = static_cast<const char*>(mapped);
    ::madvise(mapped, std::size_t(bytes), MADV_SEQUENTIAL);
  }
  ~PayloadPass() { ::munmap(const_cast<char*>(base_), std::size_t(bytes_)); }
  PayloadPass(const PayloadPass&) = delete;
  PayloadPass& operator=(const PayloadPass&) = delete;

  // Sums the bytes up to `offset` (not behind the pass).
  void sum_to(std::uint64_t offset) { pass(offset, nullptr); }
  // `to` made the `n` elements at `offset`, summing the bytes up to them first; returns whether
  // `bad` holds for any of them (tested on each block as it is copied). `to` is reserved, then
  // grown block by block, so that its zero fill is written where the copy overwrites it at
  // once, in the core's cache. Not on 2 MB pages: in this VM those came from memory the host
  // had taken back (free page reporting), and a load took 0.5 s instead of 0.12 s one time in
  // three while other processes ran.
  template <typename T, typename Bad>
  bool copy(std::uint64_t offset, std::vector<T>& to, std::size_t n, Bad bad) {
    sum_to(offset);
    to.clear();
    to.reserve(n);
    bool found = false;
    pass(offset + n * sizeof(T), [&](const char* block, std::size_t bytes) {
      const std::size_t done = to.size();
      populate_pages(to.data() + done, bytes);
      to.resize(done + bytes / sizeof(T));
      std::memcpy(to.data() + done, block, bytes);
      found |= any_bad(to.data() + done, bytes / sizeof(T), bad);
    });
    return found;
  }
  std::uint32_t crc() const { return crc_; }

 private:
  // A multiple of every element's size, small enough for L2. The mapping's pages are let go by
  // kRelease, small beside data.max_memory_mb (a streamed first pass's checksum holds 2 MB of
  // the file at a time).
  static constexpr std::size_t kBlock = std::size_t(256) << 10;
  static constexpr std::uint64_t kRelease = std::uint64_t(2) << 20;
  template <typename Each = std::nullptr_t>
  void pass(std::uint64_t to, Each each = nullptr) {
    while (at_ < to) {
      // Blocks from the pass's start: whole elements each.
      const std::size_t n = std::size_t(std::min<std::uint64_t>(kBlock, to - at_));
      crc_ = crc32c(base_ + at_, n, crc_);
      if constexpr (!std::is_same_v<Each, std::nullptr_t>) each(base_ + at_, n);
      at_ += n;
      // Let go by whole 2 MB ranges: the page cache maps a file's large folios 2 MB at a time,
      // and letting go of part of one splits its mapping (a 73 MB cache let go by 256 KiB
      // blocks: 282 splits a load).
      const std::uint64_t passed = at_ - at_ % kRelease;
      if (passed > released_) {
        ::madvise(const_cast<char*>(base_) + released_, std::size_t(passed - released_), MADV_DONTNEED);
        released_ = passed;
      }
    }
  }
  const char* base_ = nullptr;
  std::uint64_t bytes_, at_, released_;
  std::uint32_t crc_ = 0;
};

}  // namespace

bool CacheFile::payload_intact() const {
  PayloadPass pass(path_, fd_, bytes_);
  pass.sum_to(bytes_);
  return checksum_holds(pass.crc());
}

bool CacheFile::read_checked(std::int64_t r0, std::int64_t r1, SparseDataset& d,
                             std::vector<std::uint32_t>& frequency_order, int threads) const {
  const CacheLayout at = layout();
  // The payload in file order: its head (row offsets, labels, ids), then its tail (fields,
  // values, frequency order: 6 bytes a nonzero to the head's 4). With `threads` > 1 the tail is a
  // second pass on a thread of its own (one pass is bound by one core's copying and summing),
  // its sum joined to the head's (crc32c_combine).
  PayloadPass head(path_, fd_, bytes_);
  // Every check runs on the bytes as copied, but its verdict waits for the checksum's: a cache
  // that fails it is re-parsed (a warning), one that passes it and fails a check is an error.
  std::exception_ptr bad_offsets;
  const auto none = [](auto) { return false; };
  head.copy(at.row_ptr + std::uint64_t(r0) * 8, d.row_ptr, std::size_t(r1 - r0 + 1), none);
  try {
    check_offsets(r0, d.row_ptr);
  } catch (const Error&) {
    bad_offsets = std::current_exception();
  }
  // Offsets that fail their check bound nothing: no nonzeros are copied, the sums go on.
  const std::int64_t a = bad_offsets ? 0 : d.row_ptr.front(), n = bad_offsets ? 0 : d.row_ptr.back() - a;
  // The head's labels and ids, then the tail through `pass`, which sums the bytes before it first;
  // each says whether an element failed its check.
  bool bad_labels = false, bad_ids = false, bad_tail = false;
  const auto read_head = [&] {
    bad_labels = head.copy(at.label + std::uint64_t(r0) * 4, d.label, std::size_t(r1 - r0), label_bad);
    bad_ids = head.copy(at.index + std::uint64_t(a) * 4, d.index, std::size_t(n), index_bad(h_));
  };
  const auto read_tail = [&](PayloadPass& pass) {
    bad_tail = pass.copy(at.field + std::uint64_t(a) * 2, d.field, std::size_t(n), field_bad(h_));
    bad_tail |= pass.copy(at.value + std::uint64_t(a) * 4, d.value, std::size_t(n), value_bad);
    pass.copy(at.order, frequency_order, std::size_t(occurring_), none);
    pass.sum_to(bytes_);
  };
  std::uint32_t crc = 0;
  if (threads > 1) {
    std::uint32_t tail_crc = 0;
    std::exception_ptr tail_failed;
    {
      std::jthread tail_thread([&] {
        try {
          PayloadPass tail(path_, fd_, bytes_, at.field);
          read_tail(tail);
          tail_crc = tail.crc();
        } catch (...) {
          tail_failed = std::current_exception();
        }
      });
      read_head();
      head.sum_to(at.field);
    }
    if (tail_failed) std::rethrow_exception(tail_failed);
    crc = crc32c_combine(head.crc(), tail_crc, bytes_ - at.field);
  } else {
    read_head();
    read_tail(head);
    crc = head.crc();
  }
  if (!checksum_holds(crc)) {
    d = SparseDataset{};
    frequency_order.clear();
    return false;
  }
  if (bad_offsets) std::rethrow_exception(bad_offsets);
  if (bad_labels) check_labels(r0, d.label.data(), d.label.size());
  if (bad_ids || bad_tail) check_nonzeros(a, d.index.data(), d.field.data(), d.value.data(), d.index.size());
  check_frequency_order(frequency_order);
  rebase(r0, d);
  return true;
}

}  // namespace skew::wide
