// The binary cache's writers: a whole dataset's (write_cache) and a streamed first pass's, chunk
// by chunk (CacheWriter); their bytes are those lib/wide/cache.cpp reads.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/model.hpp"

namespace skew::wide {

namespace {
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

// The block CacheWriter::finish joins the parts through: small beside data.max_memory_mb, which
// counts it outside a streamed first pass's ring, and large enough for sequential reads.
constexpr std::size_t kJoinBlock = std::size_t(1) << 20;
}  // namespace

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
    std::vector<char> block(kJoinBlock);
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
