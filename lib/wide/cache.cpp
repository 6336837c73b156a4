// The binary cache beside a libsvm/libffm file (FILE.skewbin): the parsed arrays behind a
// header that ties them to the source's size and mtime, with a CRC-32C of the payload.
#include "lib/wide/cache.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "lib/core/checksum.hpp"
#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"
#include "lib/core/log.hpp"

namespace skew::wide {

// Version 02 added payload_crc; a version 01 cache fails the magic test and is rebuilt.
constexpr char kMagic[8] = {'S', 'K', 'W', 'I', 'D', 'E', '0', '2'};

namespace {
std::int64_t mtime_of(const std::string& path) {
  return static_cast<std::int64_t>(std::filesystem::last_write_time(path).time_since_epoch().count());
}

template <typename T>
void put(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
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

void write_cache(const std::string& cache, CacheHeader h, const SparseDataset& d) {
  std::string bytes(sizeof h, '\0');
  put(bytes, d.row_ptr);
  put(bytes, d.label);
  put(bytes, d.index);
  put(bytes, d.field);
  put(bytes, d.value);
  h.payload_crc = crc32c(bytes.data() + sizeof h, bytes.size() - sizeof h);
  std::memcpy(bytes.data(), &h, sizeof h);
  try {
    write_file_atomic(cache, bytes);
  } catch (const Error& e) {
    SKEW_WARN("could not write the data cache " << cache << " (" << e.what() << "); continuing without it");
  }
}

namespace {
// Copies `count` elements at byte `offset` of the mapped cache (bounds checked by the caller).
template <typename T>
void get(std::string_view bytes, std::uint64_t offset, std::vector<T>& v, std::int64_t count) {
  v.resize(std::size_t(count));
  if (count > 0) std::memcpy(v.data(), bytes.data() + offset, std::size_t(count) * sizeof(T));
}

}  // namespace

// Reads rows [r0, r1) from the cache when it matches the source; false when it does not, or
// when its payload fails its checksum (with a warning: the caller re-parses and rewrites it).
bool read_cache_slice(const std::string& cache, const CacheHeader& want, const ReadOptions& o, SparseDataset& d,
                      ReadReport& report) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(cache, ec) || std::filesystem::file_size(cache, ec) < sizeof(CacheHeader))
    return false;
  const MappedFile mapped(cache);
  const std::string_view bytes = mapped.view();
  CacheHeader h{};
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.source_size != want.source_size ||
      h.source_mtime != want.source_mtime || h.format != want.format || h.skip_bad != want.skip_bad ||
      h.hash_bits != want.hash_bits)
    return false;
  const auto corrupt = [&](const auto&... why) {
    std::ostringstream os;
    (os << ... << why);
    SKEW_THROW("corrupt data cache " << cache << ": " << os.str() << " (delete it to re-parse)");
  };
  // Every count is checked against the file's size before anything is allocated from it.
  if (h.rows < 0 || h.nnz < 0 || h.num_features < 0 || h.num_features > (std::int64_t(1) << 32) - 1 ||
      h.num_fields < 1 || h.num_fields > 65536 || h.lines < 0 || h.skipped < 0 ||
      (h.hash_bits > 0 && h.num_features != std::int64_t(1) << h.hash_bits))
    corrupt("header out of range (rows ", h.rows, ", nonzeros ", h.nnz, ", features ", h.num_features, ", fields ",
            h.num_fields, ", hash_bits ", h.hash_bits, ")");
  const std::uint64_t file_bytes = bytes.size(), rows = std::uint64_t(h.rows), nnz = std::uint64_t(h.nnz);
  if (rows > file_bytes / 12 || nnz > file_bytes / 10 || sizeof h + (rows + 1) * 8 + rows * 4 + nnz * 10 != file_bytes)
    corrupt(h.rows, " rows and ", h.nnz, " nonzeros in the header do not fit its ", file_bytes, " bytes");
  // The whole payload, not this rank's slice: one CRC per load, measured in the report.
  const std::uint32_t crc = crc32c(bytes.data() + sizeof h, file_bytes - sizeof h);
  if (crc != h.payload_crc) {
    SKEW_WARN("data cache " << cache << " fails its checksum (crc32c " << std::hex << crc << ", recorded "
                            << h.payload_crc << std::dec << "): re-parsing the text file and rewriting the cache");
    return false;
  }
  const std::int64_t r0 = h.rows * o.rank / o.world, r1 = h.rows * (o.rank + 1) / o.world;
  std::uint64_t off = sizeof h;
  get(bytes, off + std::uint64_t(r0) * 8, d.row_ptr, r1 - r0 + 1);
  off += (rows + 1) * 8;
  get(bytes, off + std::uint64_t(r0) * 4, d.label, r1 - r0);
  off += rows * 4;
  for (std::int64_t r = r0; r <= r1; ++r) {
    const std::int64_t p = d.row_ptr[std::size_t(r - r0)];
    if (p < 0 || p > h.nnz || (r > r0 && p < d.row_ptr[std::size_t(r - r0 - 1)]) || (r == 0 && p != 0) ||
        (r == h.rows && p != h.nnz))
      corrupt("row offset ", r, " is ", p, " (rows must start at 0, never go back, and end at ", h.nnz, ")");
  }
  for (std::int64_t r = r0; r < r1; ++r)
    if (const float y = d.label[std::size_t(r - r0)]; y != 0.0f && y != 1.0f) corrupt("row ", r, " has label ", y);
  const std::int64_t a = d.row_ptr.front(), n = d.row_ptr.back() - a;
  get(bytes, off + std::uint64_t(a) * 4, d.index, n);
  off += nnz * 4;
  get(bytes, off + std::uint64_t(a) * 2, d.field, n);
  off += nnz * 2;
  get(bytes, off + std::uint64_t(a) * 4, d.value, n);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::size_t i = std::size_t(j);
    if (d.index[i] >= h.num_features || d.field[i] >= h.num_fields || !std::isfinite(d.value[i]))
      corrupt("nonzero ", a + j, " is ", d.field[i], ":", d.index[i], ":", d.value[i], " (features ", h.num_features,
              ", fields ", h.num_fields, ", values finite)");
  }
  for (auto& p : d.row_ptr) p -= a;
  d.num_features = h.num_features;
  d.num_fields = static_cast<int>(h.num_fields);
  d.first_row = r0;
  report.lines = h.lines;
  report.skipped_lines = h.skipped;
  report.total_rows = h.rows;
  report.from_cache = true;
  return true;
}

}  // namespace skew::wide
