// The binary cache beside a libsvm/libffm file (FILE.skewbin): the parsed arrays behind a
// header that ties them to the source's size, mtime, ctime and inode, with a CRC-32C of the payload.
#include "lib/wide/cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "lib/wide/cache_checks.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

using cache_checks::any_bad;
using cache_checks::corrupt;
using cache_checks::field_bad;
using cache_checks::index_bad;
using cache_checks::label_bad;
using cache_checks::say;
using cache_checks::value_bad;

// Version 02 added payload_crc, 03 the frequency order, 04 the source's ctime and inode;
// an older cache fails the magic test and is rebuilt.
constexpr char kMagic[8] = {'S', 'K', 'W', 'I', 'D', 'E', '0', '4'};

CacheHeader cache_key(const std::string& source, TextFormat format, bool skip_bad_lines, int hash_bits) {
  struct stat st {};
  SKEW_CHECK(::stat(source.c_str(), &st) == 0, "cannot stat " << source << ": " << std::strerror(errno));
  auto nanoseconds = [](const timespec& t) { return std::int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; };
  CacheHeader key{};
  std::memcpy(key.magic, kMagic, 8);
  key.source_size = std::uint64_t(st.st_size);
  key.source_mtime = nanoseconds(st.st_mtim);
  key.source_ctime = nanoseconds(st.st_ctim);
  key.source_inode = std::uint64_t(st.st_ino);
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

std::unique_ptr<CacheFile> CacheFile::open(const std::string& cache, const CacheHeader& want, bool check_payload) {
  const int fd = ::open(cache.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::unique_ptr<CacheFile> file(new CacheFile(cache, fd));  // closes fd from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || std::uint64_t(st.st_size) < sizeof(CacheHeader)) return nullptr;
  CacheHeader& h = file->h_;
  file->read_at(0, &h, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.source_size != want.source_size ||
      h.source_mtime != want.source_mtime || h.source_ctime != want.source_ctime ||
      h.source_inode != want.source_inode || h.format != want.format || h.skip_bad != want.skip_bad ||
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
