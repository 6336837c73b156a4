// The whole load of a binary cache (CacheFile::read_checked: one pass over the file that sums its
// checksum while it copies this rank's rows out, block by block) against the text's parse and
// against the ranged reads a cache stream makes (read_offsets, read_rows, read_frequency_order),
// on a cache of many blocks whose nonzeros are odd in number (so the values start off their
// alignment); and what it refuses: a byte damaged in a late block fails the checksum and the
// text is parsed instead, an out-of-range id the checksum was resealed over is an error naming
// the cache and the nonzero, the same id left unsealed is re-parsed, not an error; each also with
// the second half of the payload (fields, values, order) read on a thread of its own.
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>

#include "core/fileio.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "tests/unit/error_message.hpp"
#include "tests/unit/wide_cached_file.hpp"

using namespace skew::wide;
using skew::wide::test::CachedFile;
using skew::wide::test::check_same_rows;

TEST_CASE(
    "cache: a whole load (checksum summed as the rows are copied) gives the parse's rows, and the ranged reads'") {
  const CachedFile f(2001);  // 78039 nonzeros: indices and values span two 256 KiB blocks each
  REQUIRE(f.parsed.nnz() % 2 == 1);
  const std::int64_t rows = f.parsed.rows();
  for (const auto& [world, threads] : {std::pair{1, 1}, {1, 2}, {3, 1}, {3, 2}}) {
    for (int rank = 0; rank < world; ++rank) {
      INFO("rank " << rank << " of " << world << ", " << threads << " threads");
      ReadOptions o;
      o.rank = rank;
      o.world = world;
      o.threads = threads;
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

TEST_CASE(
    "cache: a damaged byte in a late block is refused by the checksum and the text parsed, an id out of range is an "
    "error only when sealed") {
  const CachedFile f(2001);
  const std::string good = skew::read_file(f.cache);
  const std::size_t late_value = f.value_at() + 4 * 70001 + 1;  // the second 256 KiB block of the values
  REQUIRE(late_value + 4 < good.size());
  // With 2 threads the ids are summed by one pass and the values by another: damage in either
  // half, and a bad nonzero in either, counts as in one pass.
  for (const int threads : {1, 2}) {
    INFO(threads << " threads");
    ReadOptions o;
    o.threads = threads;
    // A value, or an id, changed to another in range: only the checksum can see it.
    for (const std::size_t at : {late_value, f.index_at() + 4 * 70000}) {
      std::string damaged = good;
      damaged[at] ^= 0x01;
      f.write(damaged, false);
      ReadReport report;
      const SparseDataset reparsed = load_dataset(f.path, o, &report);
      CHECK_FALSE(report.from_cache);
      check_same_rows(reparsed, f.parsed);
      CHECK(skew::read_file(f.cache) == good);  // rewritten
    }

    // Nonzero 70000's id beyond the 20000 features, in the indices' second 256 KiB block.
    std::string out_of_range = good;
    const std::uint32_t beyond = 1u << 30;
    std::memcpy(out_of_range.data() + f.index_at() + 4 * 70000, &beyond, 4);
    f.write(out_of_range, true);
    CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, o); }),
               Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("nonzero 70000 is ") &&
                   Catch::Contains(":1073741824:"));
    ReadOptions last_rank = o;  // the rank whose rows hold it names it the same way
    last_rank.rank = 2;
    last_rank.world = 3;
    CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, last_rank); }), Catch::Contains("nonzero 70000 is "));
    f.write(out_of_range, false);  // unsealed: the checksum's verdict comes first
    ReadReport report;
    check_same_rows(load_dataset(f.path, o, &report), f.parsed);
    CHECK_FALSE(report.from_cache);

    // Nonzero 70001's value not finite, sealed: the values' pass finds it.
    std::string infinite = good;
    const float inf = std::numeric_limits<float>::infinity();
    std::memcpy(infinite.data() + f.value_at() + 4 * 70001, &inf, 4);
    f.write(infinite, true);
    CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, o); }),
               Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("nonzero 70001 is ") &&
                   Catch::Contains(":inf"));
    f.write(good, false);
  }
}
