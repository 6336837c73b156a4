// The binary cache beside a libsvm/libffm file (FILE.skewbin): the parsed arrays behind a
// header that ties them to the source's size and mtime, with a CRC-32C of the payload.
#include "lib/wide/cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "lib/core/checksum.hpp"
#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"
#include "lib/core/log.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

// Version 02 added payload_crc, 03 the frequency order; an older cache fails the magic test and
// is rebuilt.
constexpr char kMagic[8] = {'S', 'K', 'W', 'I', 'D', 'E', '0', '3'};

namespace {
std::int64_t mtime_of(const std::string& path) {
  return static_cast<std::int64_t>(std::filesystem::last_write_time(path).time_since_epoch().count());
}

template <typename T>
void put(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The cache's last section: the frequency order, then its length (which closes the file).
std::string frequency_order_bytes(const std::vector<std::uint32_t>& order) {
  std::string out;
  put(out, order);
  put(out, std::vector<std::int64_t>{std::int64_t(order.size())});
  return out;
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

void write_cache(const std::string& cache, CacheHeader h, const SparseDataset& d,
                 const std::vector<std::uint32_t>& frequency_order) {
  std::string bytes(sizeof h, '\0');
  put(bytes, d.row_ptr);
  put(bytes, d.label);
  put(bytes, d.index);
  put(bytes, d.field);
  put(bytes, d.value);
  bytes += frequency_order_bytes(frequency_order);
  h.payload_crc = crc32c(bytes.data() + sizeof h, bytes.size() - sizeof h);
  std::memcpy(bytes.data(), &h, sizeof h);
  try {
    write_file_atomic(cache, bytes);
  } catch (const Error& e) {
    SKEW_WARN("could not write the data cache " << cache << " (" << e.what() << "); continuing without it");
  }
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

// Where each array starts in a cache of `h.rows` rows, `h.nnz` nonzeros and `occurring` ids in
// its frequency order (whose length closes the file, 8 bytes).
struct Sections {
  std::uint64_t row_ptr, label, index, field, value, order, end;
  Sections(const CacheHeader& h, std::uint64_t occurring) {
    const std::uint64_t rows = std::uint64_t(h.rows), nnz = std::uint64_t(h.nnz);
    row_ptr = sizeof(CacheHeader);
    label = row_ptr + (rows + 1) * 8;
    index = label + rows * 4;
    field = index + nnz * 4;
    value = field + nnz * 2;
    order = value + nnz * 4;
    end = order + occurring * 4 + 8;
  }
};

// What a read through a cache holds in memory at once: small beside data.max_memory_mb, which
// counts it outside a streamed first pass's ring, and large enough for sequential reads.
constexpr std::size_t kCacheBlock = std::size_t(1) << 20;
}  // namespace

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

bool CacheFile::payload_intact() const {
  // Read through a mapping (no copy), each block's pages let go once summed, so that the
  // process's resident memory never holds more than one block of the file.
  const std::size_t end = std::size_t(file_bytes());
  void* mapped = ::mmap(nullptr, end, PROT_READ, MAP_SHARED, fd_, 0);
  if (mapped == MAP_FAILED) corrupt(path_, say("cannot map it: ", std::strerror(errno)));
  const char* bytes = static_cast<const char*>(mapped);
  ::madvise(mapped, end, MADV_SEQUENTIAL);
  std::uint32_t crc = 0;
  for (std::size_t at = 0; at < end; at += kCacheBlock) {  // block-aligned, so page-aligned for madvise
    const std::size_t n = std::min(kCacheBlock, end - at), from = std::max(at, sizeof(CacheHeader));
    crc = crc32c(bytes + from, at + n - from, crc);
    ::madvise(const_cast<char*>(bytes) + at, n, MADV_DONTNEED);
  }
  ::munmap(mapped, end);
  if (crc == h_.payload_crc) return true;
  SKEW_WARN("data cache " << path_ << " fails its checksum (crc32c " << std::hex << crc << ", recorded "
                          << h_.payload_crc << std::dec << "): re-parsing the text file and rewriting the cache");
  return false;
}

void CacheFile::read_offsets(std::int64_t r0, std::int64_t r1, std::vector<std::int64_t>& row_ptr) const {
  row_ptr.resize(std::size_t(r1 - r0 + 1));
  read_at(Sections(h_, occurring_).row_ptr + std::uint64_t(r0) * 8, row_ptr.data(), row_ptr.size() * 8);
  for (std::int64_t r = r0; r <= r1; ++r) {
    const std::int64_t p = row_ptr[std::size_t(r - r0)];
    if (p < 0 || p > h_.nnz || (r > r0 && p < row_ptr[std::size_t(r - r0 - 1)]) || (r == 0 && p != 0) ||
        (r == h_.rows && p != h_.nnz))
      corrupt(path_,
              say("row offset ", r, " is ", p, " (rows must start at 0, never go back, and end at ", h_.nnz, ")"));
  }
}

void CacheFile::read_rows(std::int64_t r0, SparseDataset& d) const {
  const Sections at(h_, occurring_);
  const std::int64_t rows = std::int64_t(d.row_ptr.size()) - 1, a = d.row_ptr.front(), n = d.row_ptr.back() - a;
  const auto get = [&](std::uint64_t section, std::int64_t first, std::int64_t count, auto& v) {
    v.resize(std::size_t(count));
    read_at(section + std::uint64_t(first) * sizeof(v[0]), v.data(), std::size_t(count) * sizeof(v[0]));
  };
  get(at.label, r0, rows, d.label);
  for (std::int64_t r = 0; r < rows; ++r)
    if (const float y = d.label[std::size_t(r)]; y != 0.0f && y != 1.0f)
      corrupt(path_, say("row ", r0 + r, " has label ", y));
  get(at.index, a, n, d.index);
  get(at.field, a, n, d.field);
  get(at.value, a, n, d.value);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::size_t i = std::size_t(j);
    if (d.index[i] >= h_.num_features || d.field[i] >= h_.num_fields || !std::isfinite(d.value[i]))
      corrupt(path_, say("nonzero ", a + j, " is ", d.field[i], ":", d.index[i], ":", d.value[i], " (features ",
                         h_.num_features, ", fields ", h_.num_fields, ", values finite)"));
  }
  for (auto& p : d.row_ptr) p -= a;
  d.num_features = h_.num_features;
  d.num_fields = static_cast<int>(h_.num_fields);
  d.first_row = r0;
}

std::vector<std::uint32_t> CacheFile::read_frequency_order() const {
  std::vector<std::uint32_t> order(occurring_);
  read_at(Sections(h_, occurring_).order, order.data(), order.size() * sizeof(std::uint32_t));
  std::vector<bool> listed(std::size_t(h_.num_features), false);
  for (std::size_t r = 0; r < order.size(); ++r) {
    const std::uint32_t f = order[r];
    if (f >= listed.size() || listed[f])
      corrupt(path_, say("feature ", f, " at place ", r, " of the frequency order is ",
                         f >= listed.size() ? say("beyond its ", h_.num_features, " features") : "listed twice"));
    listed[f] = true;
  }
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
  if (rows > file_bytes / 12 || nnz > file_bytes / 10 || Sections(h, 0).end > file_bytes)
    corrupt(cache, say(h.rows, " rows and ", h.nnz, " nonzeros in the header do not fit its ", file_bytes, " bytes"));
  file->bytes_ = file_bytes;
  // The frequency order's length closes the file; with the header's counts it must give its size
  // (any change to it does), so that a truncated cache is refused, not taken for a damaged one.
  std::int64_t occurring = 0;
  file->read_at(file_bytes - 8, &occurring, 8);
  if (occurring < 0 || occurring > h.num_features || Sections(h, std::uint64_t(occurring)).end != file_bytes)
    corrupt(cache, say(h.rows, " rows, ", h.nnz, " nonzeros and a frequency order of ", occurring, " of ",
                       h.num_features, " features do not fit its ", file_bytes, " bytes"));
  file->occurring_ = std::uint64_t(occurring);
  if (check_payload && !file->payload_intact()) return nullptr;
  return file;
}

bool read_cache_slice(const std::string& cache, const CacheHeader& want, const ReadOptions& o, SparseDataset& d,
                      ReadReport& report) {
  const std::unique_ptr<CacheFile> file = CacheFile::open(cache, want, true);
  if (!file) return false;
  const CacheHeader& h = file->header();
  // The whole payload was checked above, not this rank's slice: one CRC per load.
  const std::int64_t r0 = h.rows * o.rank / o.world, r1 = h.rows * (o.rank + 1) / o.world;
  file->read_offsets(r0, r1, d.row_ptr);
  file->read_rows(r0, d);
  report.frequency_order = file->read_frequency_order();
  report.lines = h.lines;
  report.skipped_lines = h.skipped;
  report.total_rows = h.rows;
  report.from_cache = true;
  return true;
}

CacheWriter::CacheWriter(std::string cache, const CacheHeader& key) : cache_(std::move(cache)), h_(key) {
  try {
    for (const char* name : {"row_ptr", "label", "index", "field", "value"}) {
      parts_.push_back(cache_ + "." + name + ".tmp." + std::to_string(::getpid()));
      out_.emplace_back(parts_.back());
    }
    const std::int64_t zero = 0;
    out_[0].write(&zero, sizeof zero);
  } catch (const Error& e) {
    fail(e.what());
  }
}

CacheWriter::~CacheWriter() {
  remove_parts();
}

void CacheWriter::remove_parts() {
  out_.clear();
  std::error_code ec;
  for (const std::string& part : parts_) std::filesystem::remove(part, ec);
  parts_.clear();
}

void CacheWriter::fail(const std::string& why) {
  SKEW_WARN("could not write the data cache " << cache_ << " (" << why << "); continuing without it");
  failed_ = true;
  remove_parts();
}

void CacheWriter::append(const SparseDataset& chunk) {
  if (failed_) return;
  offsets_.resize(std::size_t(chunk.rows()));
  for (std::size_t r = 0; r < offsets_.size(); ++r) offsets_[r] = h_.nnz + chunk.row_ptr[r + 1];
  const auto put = [&](std::size_t part, const auto& v) { out_[part].write(v.data(), v.size() * sizeof(v[0])); };
  try {
    put(0, offsets_);
    put(1, chunk.label);
    put(2, chunk.index);
    put(3, chunk.field);
    put(4, chunk.value);
  } catch (const Error& e) {
    fail(e.what());
  }
  h_.rows += chunk.rows();
  h_.nnz += chunk.nnz();
  add_feature_counts(chunk, counts_);
}

bool CacheWriter::finish(std::int64_t num_features, int num_fields, std::int64_t lines, std::int64_t skipped) {
  if (failed_) return false;
  h_.num_features = num_features;
  h_.num_fields = num_fields;
  h_.lines = lines;
  h_.skipped = skipped;
  const std::string tmp = cache_ + ".tmp." + std::to_string(::getpid());
  try {
    for (OutputFile& out : out_) out.close();
    // The header's checksum is known only at the end: its place is held by zeros until then.
    OutputFile joined(tmp);
    joined.write(std::string(sizeof h_, '\0'));
    std::vector<char> block(kCacheBlock);
    std::uint32_t crc = 0;
    for (const std::string& part : parts_) {
      const int fd = ::open(part.c_str(), O_RDONLY | O_CLOEXEC);
      SKEW_CHECK(fd >= 0, "cannot open " << part << ": " << std::strerror(errno));
      ssize_t got = 0;
      while ((got = ::read(fd, block.data(), block.size())) > 0) {
        crc = crc32c(block.data(), std::size_t(got), crc);
        joined.write(block.data(), std::size_t(got));
      }
      const int err = errno;
      ::close(fd);
      SKEW_CHECK(got == 0, "reading " << part << ": " << std::strerror(err));
      std::filesystem::remove(part);
    }
    const std::string order = frequency_order_bytes(occurring_by_frequency(counts_));
    crc = crc32c(order.data(), order.size(), crc);
    joined.write(order);
    joined.close();
    h_.payload_crc = crc;
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
    const bool written = fd >= 0 && ::pwrite(fd, &h_, sizeof h_, 0) == ssize_t(sizeof h_) && ::fsync(fd) == 0;
    const int err = errno;
    if (fd >= 0) ::close(fd);
    SKEW_CHECK(written, "writing the header of " << tmp << ": " << std::strerror(err));
    std::filesystem::rename(tmp, cache_);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    fail(e.what());
    return false;
  }
  parts_.clear();
  return true;
}

}  // namespace skew::wide
