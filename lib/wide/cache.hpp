// The binary cache beside a libsvm/libffm text file (FILE.skewbin), internal to the reader:
// written after a parse, read (mapped, checksum verified, rank slice only) when its header
// matches the source file.
#pragma once
#include <cstdint>
#include <string>

#include "lib/wide/dataset.hpp"

namespace skew::wide {

struct CacheHeader {
  char magic[8];
  std::uint64_t source_size;
  std::int64_t source_mtime;
  std::uint32_t format, skip_bad;
  std::int64_t rows, nnz, num_features, num_fields, lines, skipped;
  // CRC-32C of every byte after the header: the reader's range checks cannot see a flipped bit
  // inside a value, an index or a label that stays in range.
  std::uint32_t payload_crc;
  // ReadOptions::hash_bits the indices were hashed with (0 = raw ids). Was a reserved zero
  // before hashing existed, so an older cache reads as unhashed, which it is.
  std::uint32_t hash_bits;
};
// tests/fuzz/fuzz_skewbin.cpp and its seed corpus write headers by this layout.
static_assert(sizeof(CacheHeader) == 88 && offsetof(CacheHeader, payload_crc) == 80 && offsetof(CacheHeader, hash_bits) == 84);

// The header fields that must match for a cache to stand for `source` as read now.
CacheHeader cache_key(const std::string& source, TextFormat format, bool skip_bad_lines, int hash_bits);
// Writes `h` (counts filled in by the caller) and `d`; a failed write only warns.
void write_cache(const std::string& cache, CacheHeader h, const SparseDataset& d);
// Reads this rank's rows from the cache when it matches `want` (a cache hashed with other
// hash_bits does not: it is re-parsed and rewritten); false when it does not, or
// when its payload fails its checksum (with a warning naming it: the caller re-parses and
// rewrites it). Throws naming the cache when its counts are inconsistent.
bool read_cache_slice(const std::string& cache, const CacheHeader& want, const ReadOptions& o, SparseDataset& d,
                      ReadReport& report);

}  // namespace skew::wide
