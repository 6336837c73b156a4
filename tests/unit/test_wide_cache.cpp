// The whole load of a binary cache (CacheFile::read_checked: one pass over the file that sums its
// checksum while it copies this rank's rows out, block by block) against the text's parse and
// against the ranged reads a cache stream makes (read_offsets, read_rows, read_frequency_order),
// on a cache of many blocks whose nonzeros are odd in number (so the values start off their
// alignment); and what it refuses: a byte damaged in a late block fails the checksum and the
// text is parsed instead, an out-of-range id the checksum was resealed over is an error naming
// the cache and the nonzero, the same id left unsealed is re-parsed, not an error.
#include <catch2/catch.hpp>
#include <cstring>

#include "lib/core/fileio.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "tests/unit/error_message.hpp"
#include "tests/unit/wide_cached_file.hpp"

using namespace skew::wide;
using skew::wide::test::CachedFile;
using skew::wide::test::check_same_rows;

TEST_CASE("cache: a whole load (checksum summed as the rows are copied) gives the parse's rows, and the ranged reads'") {
  const CachedFile f(2001);  // 78039 nonzeros: indices and values span two 256 KiB blocks each
  REQUIRE(f.parsed.nnz() % 2 == 1);
  const std::int64_t rows = f.parsed.rows();
  for (const int world : {1, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      INFO("rank " << rank << " of " << world);
      ReadOptions o;
      o.rank = rank;
      o.world = world;
      ReadReport report;
      const SparseDataset got = load_dataset(f.path, o, &report);
      CHECK(report.from_cache);
      CHECK(report.total_rows == rows);
      const std::int64_t r0 = rows * rank / world, r1 = rows * (rank + 1) / world;
      check_same_rows(got, slice_rows(f.parsed, r0, r1));

      // The same rows as a cache stream reads them, by ranges with pread.
      const std::unique_ptr<CacheFile> file =
          CacheFile::open(f.cache, cache_key(f.path, TextFormat::Libffm, false, 0), false);
      REQUIRE(file);
      SparseDataset ranged;
      file->read_offsets(r0, r1, ranged.row_ptr);
      file->read_rows(r0, ranged);
      check_same_rows(got, ranged);
      CHECK(report.frequency_order == file->read_frequency_order());
      CHECK(report.frequency_order == occurring_by_frequency(feature_counts(f.parsed, f.parsed.num_features)));
    }
  }
}

TEST_CASE("cache: a damaged byte in a late block is refused by the checksum and the text parsed, an id out of range is an error only when sealed") {
  const CachedFile f(2001);
  const std::string good = skew::read_file(f.cache);
  const std::size_t late_value = f.value_at() + 4 * 70001 + 1;  // the second 256 KiB block of the values
  REQUIRE(late_value + 4 < good.size());

  // A value changed to another finite value: only the checksum can see it.
  std::string damaged = good;
  damaged[late_value] ^= 0x10;
  f.write(damaged, false);
  ReadReport report;
  const SparseDataset reparsed = load_dataset(f.path, ReadOptions{}, &report);
  CHECK_FALSE(report.from_cache);
  check_same_rows(reparsed, f.parsed);
  CHECK(skew::read_file(f.cache) == good);  // rewritten

  // Nonzero 70000's id beyond the 20000 features, in the indices' second 256 KiB block.
  std::string out_of_range = good;
  const std::uint32_t beyond = 1u << 30;
  std::memcpy(out_of_range.data() + f.index_at() + 4 * 70000, &beyond, 4);
  f.write(out_of_range, true);
  CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, ReadOptions{}); }),
             Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("nonzero 70000 is ") &&
                 Catch::Contains(":1073741824:"));
  ReadOptions last_rank;  // the rank whose rows hold it names it the same way
  last_rank.rank = 2;
  last_rank.world = 3;
  CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, last_rank); }), Catch::Contains("nonzero 70000 is "));
  f.write(out_of_range, false);  // unsealed: the checksum's verdict comes first
  report = ReadReport{};
  check_same_rows(load_dataset(f.path, ReadOptions{}, &report), f.parsed);
  CHECK_FALSE(report.from_cache);
}
