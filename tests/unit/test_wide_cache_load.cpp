// The overlapped load of a binary cache (lib/wide/cache_load.hpp: ids, fields and values read a
// chunk of rows at a time on a thread of its own, renumbered and normalised per chunk, the
// checksum combined from the sections' pieces at the end) against the whole load followed by the
// renumbering and normalisation a run applies; rows asked for while later chunks still load; and
// what the verdict is when the cache is damaged (the checksum, known only at the end) or forged
// (a check, under a resealed checksum), as the whole load's.
#include <catch2/catch.hpp>
#include <cstring>

#include "lib/wide/cache_load.hpp"
#include "tests/unit/error_message.hpp"
#include "tests/unit/wide_cached_file.hpp"

using namespace skew::wide;
using skew::wide::test::CachedFile;
using skew::wide::test::check_same_rows;

namespace {

constexpr std::int64_t kRows = 20001;  // 780039 nonzeros: five chunks of 4096 rows, the last short

CacheHeader key_of(const CachedFile& f) {
  return cache_key(f.path, TextFormat::Libffm, false, 0);
}

// Rows [0, end) of `batch` (a batch from row 0) against the same rows of `want`.
void check_batch_rows(const skew::kernels::WideBatch& batch, const SparseDataset& want, std::int64_t end) {
  REQUIRE(batch.rows == end);
  const std::int64_t nnz = want.row_ptr[std::size_t(end)];
  CHECK(std::equal(batch.row_ptr, batch.row_ptr + end + 1, want.row_ptr.begin()));
  CHECK(std::equal(batch.label, batch.label + end, want.label.begin()));
  CHECK(std::equal(batch.index, batch.index + nnz, want.index.begin()));
  CHECK(std::equal(batch.field, batch.field + nnz, want.field.begin()));
  CHECK(std::equal(batch.value, batch.value + nnz, want.value.begin()));
}

}  // namespace

TEST_CASE("overlapped cache load: chunk by chunk, renumbered and normalised, the rows of the whole load") {
  const CachedFile f(kRows);
  ReadReport report;
  const SparseDataset whole = load_dataset(f.path, ReadOptions{}, &report);
  REQUIRE(report.from_cache);
  const FeatureOrder order = FeatureOrder::from_occurring(report.frequency_order, whole.num_features);
  for (const bool renumber_and_normalize : {true, false}) {
    INFO("renumbered and normalised: " << renumber_and_normalize);
    SparseDataset want = whole;
    if (renumber_and_normalize) {
      order.apply(want);
      normalize_instances(want);
    }
    SparseDataset d;
    std::vector<std::uint32_t> frequency_order;
    const std::unique_ptr<OverlappedLoad> load = OverlappedLoad::open(f.cache, key_of(f), d, frequency_order);
    REQUIRE(load);
    CHECK(frequency_order == report.frequency_order);
    CHECK(d.row_ptr == want.row_ptr);  // offsets and labels come whole with open()
    CHECK(d.label == want.label);
    CHECK(d.index.empty());
    load->start(renumber_and_normalize ? &order : nullptr, std::uint32_t(frequency_order.size()),
                renumber_and_normalize);
    // Within the first chunk, across its end, within a later one, all.
    for (const std::int64_t end :
         {std::int64_t(1), std::int64_t(4096), std::int64_t(4097), std::int64_t(12000), kRows}) {
      INFO("rows [0, " << end << ")");
      load->wait_rows(end);
      check_batch_rows(load->batch(0, end), want, end);
    }
    load->finish();
    load->finish();  // again: returns
    load->hand_over(d);
    check_same_rows(d, want);
  }
  // A load let go while it reads stops without hanging.
  SparseDataset d;
  std::vector<std::uint32_t> frequency_order;
  std::unique_ptr<OverlappedLoad> load = OverlappedLoad::open(f.cache, key_of(f), d, frequency_order);
  REQUIRE(load);
  load->start(&order, std::uint32_t(frequency_order.size()), false);
  load.reset();
}

TEST_CASE(
    "overlapped cache load: a damaged late byte fails the checksum at the end, a forged id is an error, as in the "
    "whole load") {
  const CachedFile f(kRows);
  const std::string good = skew::read_file(f.cache);
  const std::int64_t late = 700000;  // a nonzero of the last chunk
  REQUIRE(late < f.parsed.row_ptr.back());
  REQUIRE(late > f.parsed.row_ptr[16384]);
  const auto started = [&](SparseDataset& d) {
    std::vector<std::uint32_t> frequency_order;
    std::unique_ptr<OverlappedLoad> load = OverlappedLoad::open(f.cache, key_of(f), d, frequency_order);
    REQUIRE(load);
    load->start(nullptr, std::uint32_t(frequency_order.size()), false);
    return load;
  };

  // A value changed to another finite value: the early rows come in, the checksum fails at the end.
  std::string damaged = good;
  damaged[f.value_at() + 4 * std::size_t(late) + 1] ^= 0x10;
  f.write(damaged, false);
  SparseDataset d;
  std::unique_ptr<OverlappedLoad> load = started(d);
  // The loader may reach the end (and its verdict) before this thread asks for the first rows,
  // on a busy machine: then the wait reports the damage at once, which is as good.
  bool early_rows_read = false;
  try {
    load->wait_rows(4096);
    early_rows_read = true;
  } catch (const DamagedCacheError&) {
  }
  if (early_rows_read) check_batch_rows(load->batch(0, 4096), f.parsed, 4096);
  CHECK_THROWS_AS(load->finish(), DamagedCacheError);
  CHECK_THROWS_AS(load->wait_rows(kRows), DamagedCacheError);

  // An id beyond the 20000 features: under a resealed checksum an error naming the cache and the
  // nonzero (the whole load's message), unsealed a damaged cache.
  std::string out_of_range = good;
  const std::uint32_t beyond = 1u << 30;
  std::memcpy(out_of_range.data() + f.index_at() + 4 * std::size_t(late), &beyond, 4);
  for (const bool sealed : {true, false}) {
    INFO("sealed: " << sealed);
    f.write(out_of_range, sealed);
    SparseDataset forged;
    load = started(forged);
    bool damaged_verdict = false;
    std::string message;
    try {
      load->wait_rows(kRows);
    } catch (const DamagedCacheError&) {
      damaged_verdict = true;
    } catch (const skew::Error& e) {
      message = e.what();
    }
    CHECK(damaged_verdict == !sealed);
    if (sealed)
      CHECK_THAT(message, Catch::Contains("corrupt data cache " + f.cache) &&
                              Catch::Contains("nonzero " + std::to_string(late) + " is ") &&
                              Catch::Contains(":1073741824:"));
  }

  // A row offset that goes back, resealed: not opened, so the whole load decides (an error).
  std::string bad_offset = good;
  const std::int64_t back = 5;
  std::memcpy(bad_offset.data() + sizeof(CacheHeader) + 8 * 100, &back, 8);
  f.write(bad_offset, true);
  SparseDataset untouched;
  std::vector<std::uint32_t> frequency_order;
  CHECK_FALSE(OverlappedLoad::open(f.cache, key_of(f), untouched, frequency_order));
  CHECK(untouched.row_ptr.size() == 1);
  CHECK_THAT(skew::test::error_of([&] { load_dataset(f.path, ReadOptions{}); }),
             Catch::Contains("row offset 100 is 5"));
}
