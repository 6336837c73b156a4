// The binary cache beside a libsvm/libffm text file (FILE.skewbin), internal to the reader:
// written after a parse (whole, or chunk by chunk by a streamed first pass), read (checksum
// verified, rank slice only, or chunk by chunk by a stream) when its header matches the source.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/fileio.hpp"
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
  // What a user cannot set by accident (format 04): size and mtime survive an edit followed by
  // `touch -d`, but the kernel sets the status-change time to now on every write, chmod or
  // utimensat, and an editor that writes a new file and renames it (sed -i) gives another inode.
  // Not a content checksum: that would read the whole source on every run, the I/O the cache
  // exists to save.
  // Not the device number: a network file system's differs from node to node.
  std::int64_t source_ctime;  // nanoseconds since the epoch
  std::uint64_t source_inode;
};
// tests/fuzz/fuzz_skewbin.cpp and its seed corpus write headers by this layout.
static_assert(sizeof(CacheHeader) == 104 && offsetof(CacheHeader, payload_crc) == 80 &&
              offsetof(CacheHeader, hash_bits) == 84 && offsetof(CacheHeader, source_ctime) == 88);

// The header fields that must match for a cache to stand for `source` as read now: its size,
// mtime, ctime and inode, and the read's format, skip_bad_lines and hash_bits.
CacheHeader cache_key(const std::string& source, TextFormat format, bool skip_bad_lines, int hash_bits);
// Writes `h` (counts filled in by the caller), `d` and d's frequency order (its features that
// occur, by descending count, ties by id: occurring_by_frequency); a failed write only warns.
void write_cache(const std::string& cache, CacheHeader h, const SparseDataset& d,
                 const std::vector<std::uint32_t>& frequency_order);

// The error of a cache whose frequency order lacks features its rows hold (an id renumbered
// beyond the order's length), for the loads that renumber by it.
std::string order_misses_features(const std::string& cache);

// Faults in the whole pages of [at, at + bytes) in one call (MADV_POPULATE_WRITE, Linux 5.14; a
// hint: older kernels refuse it and the pages fault one by one as they are written), not one
// fault a page: for arrays a load is about to fill.
void populate_pages(void* at, std::size_t bytes);

// Where each array of a cache starts (header, row offsets, labels, ids, fields, values, the
// frequency order and its length, in that order), and where it ends.
struct CacheLayout {
  std::uint64_t row_ptr, label, index, field, value, order, end;
  CacheLayout(const CacheHeader& h, std::uint64_t occurring);
};

// A cache whose header matched, its rows read by ranges with pread (so only the rows asked for
// become the process's memory), every range checked as it is read.
class CacheFile {
 public:
  // `cache` opened when it is a file whose header matches `want` (a cache hashed with other
  // hash_bits does not: it is re-parsed and rewritten) and, with `check_payload`, whose payload
  // passes its checksum (else a warning naming it); null otherwise. Throws naming the cache when
  // its counts are inconsistent with its size.
  static std::unique_ptr<CacheFile> open(const std::string& cache, const CacheHeader& want, bool check_payload);
  ~CacheFile();
  CacheFile(const CacheFile&) = delete;
  CacheFile& operator=(const CacheFile&) = delete;

  const CacheHeader& header() const { return h_; }
  const std::string& path() const { return path_; }
  std::uint64_t file_bytes() const;
  // Whether the payload's CRC-32C is the header's (summed through a mapping whose pages are let
  // go block by block); warns naming the cache when it is not.
  bool payload_intact() const;
  // Rows [r0, r1) into `d` and the whole file's frequency order, in one pass over the file that
  // also sums its checksum (a whole load: the bytes are read from memory once), the fields,
  // values and order by a second pass on a thread of its own when `threads` > 1. False, with `d` and the
  // order emptied, when the checksum fails (a warning names the cache); else every check of
  // read_offsets, read_rows and read_frequency_order, each throwing as they do.
  bool read_checked(std::int64_t r0, std::int64_t r1, SparseDataset& d, std::vector<std::uint32_t>& frequency_order,
                    int threads) const;
  // Stored row offsets [r0, r1] into `row_ptr` (checked: from 0, never back, ending at nnz).
  void read_offsets(std::int64_t r0, std::int64_t r1, std::vector<std::int64_t>& row_ptr) const;
  // Rows [r0, r0 + d.row_ptr.size() - 1) into `d`, whose row_ptr holds their stored offsets
  // (read_offsets); labels and nonzeros checked, row_ptr rebased to 0, first_row = r0.
  void read_rows(std::int64_t r0, SparseDataset& d) const;
  // The whole file's frequency order (checked: ids in range, none twice).
  std::vector<std::uint32_t> read_frequency_order() const;

  // For a load that reads its pieces in another order than the file's (lib/wide/cache_load.hpp):
  CacheLayout layout() const { return CacheLayout(h_, occurring_); }
  // `bytes` at `offset` into `to`; returns their CRC-32C, continued from `crc`.
  std::uint32_t read_summed(std::uint64_t offset, void* to, std::size_t bytes, std::uint32_t crc) const;
  // Whether `crc`, the payload's as summed, is the header's; warns naming the cache when not.
  bool checksum_holds(std::uint32_t crc) const;
  // Each throws naming the cache at the first bad one: offsets of rows r0.. (from 0, never back,
  // ending at the nonzeros), labels of rows r0.. (0 or 1), nonzeros a.. (id and field in range,
  // value finite), the frequency order (ids in range, none twice).
  void check_offsets(std::int64_t r0, const std::vector<std::int64_t>& row_ptr) const;
  void check_labels(std::int64_t r0, const float* label, std::size_t n) const;
  void check_nonzeros(std::int64_t a, const std::uint32_t* index, const std::uint16_t* field, const float* value,
                      std::size_t n) const;
  void check_frequency_order(const std::vector<std::uint32_t>& order) const;

 private:
  CacheFile(std::string path, int fd);
  void read_at(std::uint64_t offset, void* to, std::size_t bytes) const;
  // d's row_ptr rebased to 0 and its shape and first row (r0) set, once its rows are read.
  void rebase(std::int64_t r0, SparseDataset& d) const;
  std::string path_;
  int fd_;
  CacheHeader h_{};
  std::uint64_t bytes_ = 0;      // the file's size
  std::uint64_t occurring_ = 0;  // length of the frequency order
};

// Reads this rank's rows, and the whole file's frequency order into report.frequency_order,
// from the cache when CacheFile::open opens it (checksum checked); false when it does not (the
// caller re-parses and rewrites it).
bool read_cache_slice(const std::string& cache, const CacheHeader& want, const ReadOptions& o, SparseDataset& d,
                      ReadReport& report);

// The cache of a file parsed in chunks (a streamed first pass), in bounded memory: each
// chunk's arrays are appended to one temporary file per array beside the cache, and finish()
// joins them behind the header (checksummed block by block), followed by the frequency order of
// the rows appended, into the cache, written to a temporary name and renamed. The same bytes
// write_cache writes for the whole file. A failed
// write warns and leaves no cache.
class CacheWriter {
 public:
  CacheWriter(std::string cache, const CacheHeader& key);
  ~CacheWriter();  // removes the temporaries
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  // The next rows of the file, as parsed.
  void append(const SparseDataset& chunk);
  // Writes the cache of the rows appended (the header's other counts from the caller); true
  // when it was written.
  bool finish(std::int64_t num_features, int num_fields, std::int64_t lines, std::int64_t skipped);

 private:
  void fail(const std::string& why);
  void remove_parts();
  std::string cache_;
  CacheHeader h_;
  std::vector<std::string> parts_;  // row_ptr, label, index, field, value
  std::vector<OutputFile> out_;
  std::vector<std::int64_t> offsets_;  // a chunk's row_ptr shifted to the file's
  std::vector<std::int64_t> counts_;   // feature occurrences, for the frequency order
  bool failed_ = false;
};

}  // namespace skew::wide
