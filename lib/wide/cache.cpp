// The binary cache beside a libsvm/libffm file (FILE.skewbin): the parsed arrays behind a
// header that ties them to the source's size and mtime, with a CRC-32C of the payload.
#include "lib/wide/cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

// Version 02 added payload_crc, 03 the frequency order; an older cache fails the magic test and
// is rebuilt.
constexpr char kMagic[8] = {'S', 'K', 'W', 'I', 'D', 'E', '0', '3'};

namespace {
std::int64_t mtime_of(const std::string& path) {
  return static_cast<std::int64_t>(std::filesystem::last_write_time(path).time_since_epoch().count());
}
}  // namespace

CacheHeader cache_key(const std::string& source, TextFormat format, bool skip_bad_lines, int hash_bits) {
  CacheHeader key{};
  std::memcpy(key.magic, kMagic, 8);
  key.source_size = std::filesystem::file_size(source);
  key.source_mtime = mtime_of(source);
  key.format = static_cast<std::uint32_t>(format);
  key.skip_bad = skip_bad_lines ? 1 : 0;
  key.hash_bits = static_cast<std::uint32_t>(hash_bits);
  return key;
}

std::string order_misses_features(const std::string& cache) {
  return "corrupt data cache " + cache + ": its frequency order misses features of its rows (delete it to re-parse)";
}

void populate_pages(void* at, std::size_t bytes) {
  constexpr std::uintptr_t kPage = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(at) + kPage - 1) & ~(kPage - 1),
                       end = (reinterpret_cast<std::uintptr_t>(at) + bytes) & ~(kPage - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

CacheLayout::CacheLayout(const CacheHeader& h, std::uint64_t occurring) {
  const std::uint64_t rows = std::uint64_t(h.rows), nnz = std::uint64_t(h.nnz);
  row_ptr = sizeof(CacheHeader);
  label = row_ptr + (rows + 1) * 8;
  index = label + rows * 4;
  field = index + nnz * 4;
  value = field + nnz * 2;
  order = value + nnz * 4;
  end = order + occurring * 4 + 8;
}

namespace {
[[noreturn]] void corrupt(const std::string& cache, const std::string& why) {
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
constexpr auto label_bad = [](float y) { return (y != 0.0f) & (y != 1.0f); };
// Not finite: all exponent bits set.
constexpr auto value_bad = [](float v) { return (std::bit_cast<std::uint32_t>(v) & 0x7f800000u) == 0x7f800000u; };
// A feature id beyond the header's features (at most 2^32 - 1 of them, open() checks).
auto index_bad(const CacheHeader& h) {
  const std::uint32_t last = std::uint32_t(h.num_features - 1);
  const bool none = h.num_features == 0;
  return [=](std::uint32_t i) { return none | (i > last); };
}
// A field beyond the header's fields (1 to 65536 of them, open() checks).
auto field_bad(const CacheHeader& h) {
  const std::uint16_t last = std::uint16_t(h.num_fields - 1);
  return [=](std::uint16_t f) { return f > last; };
}

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

void CacheFile::check_labels(std::int64_t r0, const float* label, std::size_t n) const {
  if (!any_bad(label, n, label_bad)) return;
  for (std::size_t r = 0; r < n; ++r)
    if (label_bad(label[r])) corrupt(path_, say("row ", r0 + std::int64_t(r), " has label ", label[r]));
}

void CacheFile::check_nonzeros(std::int64_t a, const std::uint32_t* index, const std::uint16_t* field,
                               const float* value, std::size_t n) const {
  const auto index_out = index_bad(h_);
  const auto field_out = field_bad(h_);
  if (!any_bad(index, n, index_out) && !any_bad(field, n, field_out) && !any_bad(value, n, value_bad)) return;
  for (std::size_t i = 0; i < n; ++i)
    if (index_out(index[i]) || field_out(field[i]) || value_bad(value[i]))
      corrupt(path_, say("nonzero ", a + std::int64_t(i), " is ", field[i], ":", index[i], ":", value[i], " (features ",
                         h_.num_features, ", fields ", h_.num_fields, ", values finite)"));
}

void CacheFile::check_offsets(std::int64_t r0, const std::vector<std::int64_t>& row_ptr) const {
  for (std::size_t i = 0; i < row_ptr.size(); ++i) {
    const std::int64_t r = r0 + std::int64_t(i), p = row_ptr[i];
    if (p < 0 || p > h_.nnz || (i > 0 && p < row_ptr[i - 1]) || (r == 0 && p != 0) || (r == h_.rows && p != h_.nnz))
      corrupt(path_,
              say("row offset ", r, " is ", p, " (rows must start at 0, never go back, and end at ", h_.nnz, ")"));
  }
}

void CacheFile::check_frequency_order(const std::vector<std::uint32_t>& order) const {
  // The first place whose id is beyond the features or listed at an earlier place. Found with a
  // bit a feature, or, where those bits would outweigh the order (a header claiming billions of
  // features over a short order: 512 MB of bits), by sorting the order's (id, place) pairs, so
  // that the memory the check takes is bounded by the file's size.
  const std::uint64_t features = std::uint64_t(h_.num_features);
  std::size_t bad = order.size();
  if (features / 8 <= order.size() * 8 + 65536) {
    bad = listed_ids(order, features).first_bad;
  } else {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> by_id(order.size());
    for (std::size_t r = 0; r < order.size(); ++r) by_id[r] = {order[r], std::uint32_t(r)};
    std::sort(by_id.begin(), by_id.end());
    // An id's places after its first are where it is listed twice.
    for (std::size_t i = 0; i < by_id.size(); ++i)
      if (by_id[i].first >= features || (i > 0 && by_id[i].first == by_id[i - 1].first))
        bad = std::min<std::size_t>(bad, by_id[i].second);
  }
  if (bad == order.size()) return;
  const std::uint32_t f = order[bad];
  corrupt(path_, say("feature ", f, " at place ", bad, " of the frequency order is ",
                     f >= features ? say("beyond its ", h_.num_features, " features") : "listed twice"));
}

CacheFile::CacheFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

CacheFile::~CacheFile() {
  ::close(fd_);
}

std::uint64_t CacheFile::file_bytes() const {
  return bytes_;
}

void CacheFile::read_at(std::uint64_t offset, void* to, std::size_t bytes) const {
  char* at = static_cast<char*>(to);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, at, bytes, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      corrupt(path_, got < 0 ? say("read failed: ", std::strerror(errno)) : say("it ends at byte ", offset));
    at += got;
    offset += std::uint64_t(got);
    bytes -= std::size_t(got);
  }
}

std::uint32_t CacheFile::read_summed(std::uint64_t offset, void* to, std::size_t bytes, std::uint32_t crc) const {
  read_at(offset, to, bytes);
  return crc32c(to, bytes, crc);
}

bool CacheFile::checksum_holds(std::uint32_t crc) const {
  if (crc == h_.payload_crc) return true;
  SKEW_WARN("data cache " << path_ << " fails its checksum (crc32c " << std::hex << crc << ", recorded "
                          << h_.payload_crc << std::dec << "): re-parsing the text file and rewriting the cache");
  return false;
}

bool CacheFile::payload_intact() const {
  PayloadPass pass(path_, fd_, bytes_);
  pass.sum_to(bytes_);
  return checksum_holds(pass.crc());
}

void CacheFile::read_offsets(std::int64_t r0, std::int64_t r1, std::vector<std::int64_t>& row_ptr) const {
  row_ptr.resize(std::size_t(r1 - r0 + 1));
  read_at(layout().row_ptr + std::uint64_t(r0) * 8, row_ptr.data(), row_ptr.size() * 8);
  check_offsets(r0, row_ptr);
}

void CacheFile::read_rows(std::int64_t r0, SparseDataset& d) const {
  const CacheLayout at = layout();
  const std::int64_t rows = std::int64_t(d.row_ptr.size()) - 1, a = d.row_ptr.front(), n = d.row_ptr.back() - a;
  const auto get = [&](std::uint64_t section, std::int64_t first, std::int64_t count, auto& v) {
    v.resize(std::size_t(count));
    read_at(section + std::uint64_t(first) * sizeof(v[0]), v.data(), std::size_t(count) * sizeof(v[0]));
  };
  get(at.label, r0, rows, d.label);
  check_labels(r0, d.label.data(), d.label.size());
  get(at.index, a, n, d.index);
  get(at.field, a, n, d.field);
  get(at.value, a, n, d.value);
  check_nonzeros(a, d.index.data(), d.field.data(), d.value.data(), d.index.size());
  rebase(r0, d);
}

void CacheFile::rebase(std::int64_t r0, SparseDataset& d) const {
  const std::int64_t a = d.row_ptr.front();
  for (auto& p : d.row_ptr) p -= a;
  d.num_features = h_.num_features;
  d.num_fields = static_cast<int>(h_.num_fields);
  d.first_row = r0;
}

std::vector<std::uint32_t> CacheFile::read_frequency_order() const {
  std::vector<std::uint32_t> order(occurring_);
  read_at(layout().order, order.data(), order.size() * sizeof(std::uint32_t));
  check_frequency_order(order);
  return order;
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

std::unique_ptr<CacheFile> CacheFile::open(const std::string& cache, const CacheHeader& want, bool check_payload) {
  const int fd = ::open(cache.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::unique_ptr<CacheFile> file(new CacheFile(cache, fd));  // closes fd from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || std::uint64_t(st.st_size) < sizeof(CacheHeader)) return nullptr;
  CacheHeader& h = file->h_;
  file->read_at(0, &h, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.source_size != want.source_size ||
      h.source_mtime != want.source_mtime || h.format != want.format || h.skip_bad != want.skip_bad ||
      h.hash_bits != want.hash_bits)
    return nullptr;
  // Every count is checked against the file's size before anything is allocated from it.
  if (h.rows < 0 || h.nnz < 0 || h.num_features < 0 || h.num_features > (std::int64_t(1) << 32) - 1 ||
      h.num_fields < 1 || h.num_fields > 65536 || h.lines < 0 || h.skipped < 0 ||
      (h.hash_bits > 0 && h.num_features != std::int64_t(1) << h.hash_bits))
    corrupt(cache, say("header out of range (rows ", h.rows, ", nonzeros ", h.nnz, ", features ", h.num_features,
                       ", fields ", h.num_fields, ", hash_bits ", h.hash_bits, ")"));
  const std::uint64_t file_bytes = std::uint64_t(st.st_size), rows = std::uint64_t(h.rows), nnz = std::uint64_t(h.nnz);
  if (rows > file_bytes / 12 || nnz > file_bytes / 10 || CacheLayout(h, 0).end > file_bytes)
    corrupt(cache, say(h.rows, " rows and ", h.nnz, " nonzeros in the header do not fit its ", file_bytes, " bytes"));
  file->bytes_ = file_bytes;
  // The frequency order's length closes the file; with the header's counts it must give its size
  // (any change to it does), so that a truncated cache is refused, not taken for a damaged one.
  std::int64_t occurring = 0;
  file->read_at(file_bytes - 8, &occurring, 8);
  if (occurring < 0 || occurring > h.num_features || CacheLayout(h, std::uint64_t(occurring)).end != file_bytes)
    corrupt(cache, say(h.rows, " rows, ", h.nnz, " nonzeros and a frequency order of ", occurring, " of ",
                       h.num_features, " features do not fit its ", file_bytes, " bytes"));
  file->occurring_ = std::uint64_t(occurring);
  if (check_payload && !file->payload_intact()) return nullptr;
  return file;
}

bool read_cache_slice(const std::string& cache, const CacheHeader& want, const ReadOptions& o, SparseDataset& d,
                      ReadReport& report) {
  // The checksum is summed as this rank's rows are copied: one pass over the file's bytes.
  const std::unique_ptr<CacheFile> file = CacheFile::open(cache, want, false);
  if (!file) return false;
  const CacheHeader& h = file->header();
  const std::int64_t r0 = h.rows * o.rank / o.world, r1 = h.rows * (o.rank + 1) / o.world;
  if (!file->read_checked(r0, r1, d, report.frequency_order, o.threads)) return false;
  report.lines = h.lines;
  report.skipped_lines = h.skipped;
  report.total_rows = h.rows;
  report.from_cache = true;
  return true;
}

}  // namespace skew::wide
