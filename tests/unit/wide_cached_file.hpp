// A libffm file and its binary cache for the cache tests (test_wide_cache.cpp,
// test_wide_cache_load.cpp): the text's own parse as the reference, the sections' offsets, and a
// writer of damaged or forged caches that keeps the header matching the source.
#pragma once
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/checksum.hpp"
#include "core/fileio.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::wide::test {

// A libffm file of synthetic Criteo rows (39 nonzeros each, so an odd row count gives an odd
// nonzero count) with values that differ per nonzero, in a directory removed at the end.
struct CachedFile {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("skew_wide_cache_" + std::to_string(getpid()));
  std::string path = (dir / "d.libffm").string(), cache = path + ".skewbin";
  SparseDataset parsed;  // the reference: the text parsed with no cache involved
  explicit CachedFile(std::int64_t rows) {
    std::filesystem::create_directories(dir);
    SparseDataset d = generate_synthetic(
        parse_synthetic_spec("synthetic:criteo?rows=" + std::to_string(rows) + "&features=20000&seed=5"), 0, rows);
    for (std::size_t e = 0; e < d.value.size(); ++e) d.value[e] = 0.125f + float(e % 13) / 5.0f;
    skew::write_file_atomic(path, format_text(d, TextFormat::Libffm));
    ReadOptions o;
    o.use_cache = false;
    parsed = load_dataset(path, o);
    ReadReport written;
    load_dataset(path, ReadOptions{}, &written);
    REQUIRE_FALSE(written.from_cache);
    REQUIRE(std::filesystem::exists(cache));
  }
  ~CachedFile() { std::filesystem::remove_all(dir); }

  // Byte offsets of the sections (lib/wide/cache.cpp's layout).
  std::size_t index_at() const { return sizeof(CacheHeader) + (parsed.label.size() + 1) * 8 + parsed.label.size() * 4; }
  std::size_t value_at() const { return index_at() + parsed.index.size() * 6; }

  // Writes `bytes` as the cache, its checksum resealed over them (as a forger would) or not;
  // the source is not touched (setting its mtime would change its ctime), so the header still
  // matches it.
  void write(std::string bytes, bool reseal) const {
    if (reseal) {
      const std::uint32_t crc = skew::crc32c(bytes.data() + sizeof(CacheHeader), bytes.size() - sizeof(CacheHeader));
      std::memcpy(bytes.data() + 80, &crc, 4);
    }
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes;
  }
};

inline void check_same_rows(const SparseDataset& got, const SparseDataset& want) {
  CHECK(got.row_ptr == want.row_ptr);
  CHECK(got.label == want.label);
  CHECK(got.index == want.index);
  CHECK(got.field == want.field);
  CHECK(got.value == want.value);
  CHECK(got.num_features == want.num_features);
  CHECK(got.num_fields == want.num_fields);
  CHECK(got.first_row == want.first_row);
}

}  // namespace skew::wide::test
