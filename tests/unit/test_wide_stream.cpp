// The streaming reader (lib/wide/stream.hpp) against the whole-file parse: the chunks of a pass
// join into exactly parse_text's dataset (libsvm and libffm, blocks cut inside lines, a last
// line without its newline), the ring never holds more than its budget, the mini-batches are the
// whole dataset's row for row (batches inside a chunk and across two), a bad value far into the
// file is refused with its file:line, and a line longer than a slot names the budget's key. The
// binary cache streamed: a first pass writes the bytes the whole load writes, a cache stream's
// chunks join into the whole parse within its ring, and a damaged cache is ignored (bad checksum)
// or refused naming it (truncated). A pass restricted to rows [first, last) (a rank's share)
// yields exactly those rows of the whole parse, from the text and from the cache.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/fileio.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/stream.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew::wide;

namespace {

struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& text)
      : path((std::filesystem::temp_directory_path() / ("skew_stream_" + std::to_string(getpid()) + "_" + name))
                 .string()) {
    skew::write_file_atomic(path, text);
  }
  ~TempFile() { std::filesystem::remove(path); }
};

// Synthetic Criteo-like rows as text, values made non-trivial (the generator writes 1s) so that
// a value landing on the wrong row shows; the last newline dropped.
std::string criteo_text(std::int64_t rows, TextFormat format) {
  SparseDataset d = generate_synthetic(
      parse_synthetic_spec("synthetic:criteo?rows=" + std::to_string(rows) + "&features=5000&alpha=1.1&seed=3"), 0,
      rows);
  for (std::size_t e = 0; e < d.value.size(); ++e) d.value[e] = 0.25f + float(e % 7) / 3.0f;
  std::string text = format_text(d, format);
  text.pop_back();
  return text;
}

SparseDataset whole(const std::string& text, TextFormat format) {
  return parse_text(text, "whole", format, ReadOptions{}, nullptr);
}

// Row r of d as one comparable tuple.
struct Row {
  std::vector<std::uint32_t> index;
  std::vector<std::uint16_t> field;
  std::vector<float> value;
  float label;
  bool operator==(const Row&) const = default;
};
Row row_of(const SparseDataset& d, std::int64_t r) {
  const auto a = d.row_ptr[std::size_t(r)], z = d.row_ptr[std::size_t(r) + 1];
  return Row{{d.index.begin() + a, d.index.begin() + z},
             {d.field.begin() + a, d.field.begin() + z},
             {d.value.begin() + a, d.value.begin() + z},
             d.label[std::size_t(r)]};
}

}  // namespace

TEST_CASE("stream: a pass's chunks join into the whole-file parse, within the ring's budget") {
  for (const TextFormat format : {TextFormat::Libsvm, TextFormat::Libffm}) {
    const std::string text = criteo_text(3000, format);
    const TempFile file("join.txt", text);
    const SparseDataset expect = whole(text, format);
    const std::int64_t slot = 96 << 10;  // about 32 KiB blocks: a thousand-odd KB file in dozens of chunks
    TextStream stream(file.path, format, ReadOptions{}, slot, 3, "test budget");
    for (int pass = 0; pass < 2; ++pass) {  // epochs re-read the file the same way
      stream.rewind();
      SparseDataset joined;
      std::int64_t lines = 0, previous_end = 0, chunks = 0, cut_blocks = 0;
      while (StreamChunk* c = stream.next()) {
        const SparseDataset& d = c->data;
        CHECK(d.first_row == joined.rows());
        for (std::int64_t r = 0; r < d.rows(); ++r) {
          const Row row = row_of(d, r);
          joined.append_row(row.index.data(), row.field.data(), row.value.data(), row.index.size(), row.label);
        }
        lines += c->lines;
        // A block ends mid-line and is cut back to its last newline (the rest starts the next).
        if (c->end_offset - previous_end < slot / 3 && c->end_offset < std::int64_t(text.size())) ++cut_blocks;
        CHECK(text[std::size_t(c->end_offset) - 1] ==
              (c->end_offset == std::int64_t(text.size()) ? text.back() : '\n'));
        previous_end = c->end_offset;
        ++chunks;
      }
      CHECK(chunks >= 10);
      CHECK(cut_blocks == chunks - 1);  // every block but the last (partial) one
      CHECK(previous_end == std::int64_t(text.size()));
      CHECK(lines == 3000);
      CHECK(joined.row_ptr == expect.row_ptr);
      CHECK(joined.index == expect.index);
      CHECK(joined.field == expect.field);
      CHECK(joined.value == expect.value);
      CHECK(joined.label == expect.label);
    }
    CHECK(stream.peak_ring_bytes() > stream.ring_budget() / 3);  // the counter sees the buffers
    CHECK(stream.peak_ring_bytes() <= stream.ring_budget());
  }
}

TEST_CASE("stream: the first pass finds the whole file's rows, shape and feature counts") {
  const std::string text = criteo_text(2000, TextFormat::Libffm);
  const TempFile file("scan.ffm", text);
  const SparseDataset expect = whole(text, TextFormat::Libffm);
  TextStream stream(file.path, TextFormat::Libffm, ReadOptions{}, 64 << 10, 3, "test budget");
  const StreamScan scan = scan_stream(stream, 0, true);
  CHECK(scan.rows == 2000);
  CHECK(scan.num_features == expect.num_features);
  CHECK(scan.num_fields == expect.num_fields);
  CHECK(scan.num_fields == 39);
  CHECK(scan.counts == feature_counts(expect, expect.num_features));
  CHECK(scan_stream(stream, 12, false).num_features == 4096);  // hashed: the whole row space
  std::int64_t widest = 0;
  for (std::int64_t r = 0; r < expect.rows(); ++r)
    widest = std::max(widest, expect.row_ptr[std::size_t(r) + 1] - expect.row_ptr[std::size_t(r)]);
  CHECK(scan.max_row_nonzeros == widest);
}

TEST_CASE("stream: mini-batches are the whole dataset's, inside chunks and across them") {
  const std::string text = criteo_text(2500, TextFormat::Libsvm);
  const TempFile file("batches.txt", text);
  const SparseDataset expect = whole(text, TextFormat::Libsvm);
  for (const std::int64_t batch : {1, 7, 333, 5000}) {
    TextStream stream(file.path, TextFormat::Libsvm, ReadOptions{}, 48 << 10, 2, "test budget");
    std::int64_t prepared = 0;
    StreamBatches batches(
        stream, batch, [&](SparseDataset& d) { prepared += d.rows(); }, expect.rows(), 0);
    batches.rewind();
    const SparseDataset* data = nullptr;
    std::int64_t begin = 0, end = 0, row = 0, steps = 0;
    while (batches.next(data, begin, end)) {
      REQUIRE(end - begin == std::min(batch, expect.rows() - row));
      for (std::int64_t r = begin; r < end; ++r, ++row) REQUIRE(row_of(*data, r) == row_of(expect, row));
      ++steps;
    }
    CHECK(row == expect.rows());
    CHECK(prepared == expect.rows());
    CHECK(steps == (expect.rows() + batch - 1) / batch);
    CHECK(stream.chunks_read() >= 10);
    const StreamProgress p = batches.progress();
    CHECK(p.rows == expect.rows());
    CHECK(p.bytes_done == std::int64_t(text.size()));
    CHECK(p.eta_seconds() == 0.0);
    CHECK(StreamProgress{100, 400, 1000, 2.0}.eta_seconds() == Approx(6.0));  // 3x the rows left: 3x the time
  }
}

TEST_CASE("stream: a bad value far into the file is refused with its file:line") {
  std::string text = criteo_text(3000, TextFormat::Libsvm) + "\n";
  const std::int64_t bad_line = 2950;
  std::size_t at = 0;
  for (int l = 1; l < bad_line; ++l) at = text.find('\n', at) + 1;
  text.insert(text.find(' ', at) + 1, "17:nan ");
  const TempFile file("bad.txt", text);
  TextStream stream(file.path, TextFormat::Libsvm, ReadOptions{}, 64 << 10, 3, "test budget");
  const std::string error = skew::test::error_of([&] { scan_stream(stream, 0, false); });
  CHECK_THAT(error, Catch::Contains(file.path + ":" + std::to_string(bad_line) + ":") && Catch::Contains("not finite"));
  CHECK(stream.chunks_read() >= 5);  // the chunks before it came through first

  ReadOptions skip;
  skip.skip_bad_lines = true;
  TextStream skipping(file.path, TextFormat::Libsvm, skip, 64 << 10, 3, "test budget");
  const StreamScan scan = scan_stream(skipping, 0, false);
  CHECK(scan.rows == 2999);
  CHECK(scan.report.skipped_lines == 1);
  CHECK_THAT(scan.report.first_bad_line, Catch::StartsWith(file.path + ":" + std::to_string(bad_line) + ":"));
}

TEST_CASE("stream: a line longer than a ring slot names the budget") {
  std::string text = "1 1:1\n0";
  for (int i = 0; i < 3000; ++i) {  // appended piecewise: GCC 12 warns on " " + s + ":1"
    text += ' ';
    text += std::to_string(i);
    text += ":1";
  }
  text += "\n1 2:1\n";
  const TempFile file("long.txt", text);
  TextStream stream(file.path, TextFormat::Libsvm, ReadOptions{}, 12 << 10, 3, "data.max_memory_mb = 1");
  CHECK_THAT(skew::test::error_of([&] { scan_stream(stream, 0, false); }),
             Catch::Contains(file.path + ":2: a line longer than") && Catch::Contains("raise data.max_memory_mb = 1"));
  CHECK_THAT(skew::test::error_of(
                 [] { TextStream("x", TextFormat::Libsvm, ReadOptions{}, 100, 3, "data.max_memory_mb = 1"); }),
             Catch::Contains("data.max_memory_mb = 1 leaves 100 bytes per ring slot"));
}

namespace {
// The chunks of a pass over `stream` joined into one dataset (checking each starts where the last ended).
// A pass's chunks joined; its rows start at the source's row `first`.
SparseDataset join_pass(ChunkStream& stream, std::int64_t first = 0) {
  stream.rewind();
  SparseDataset joined;
  while (StreamChunk* c = stream.next()) {
    CHECK(c->data.first_row == first + joined.rows());
    for (std::int64_t r = 0; r < c->data.rows(); ++r) {
      const Row row = row_of(c->data, r);
      joined.append_row(row.index.data(), row.field.data(), row.value.data(), row.index.size(), row.label);
    }
  }
  return joined;
}

// A first pass over `path`'s text that writes its cache as it goes (as wide_train's does).
void write_cache_streamed(const std::string& path, TextFormat format, const ReadOptions& o) {
  TextStream text(path, format, o, 64 << 10, 3, "test budget");
  CacheWriter writer(path + ".skewbin", cache_key(path, format, o.skip_bad_lines, o.hash_bits));
  const StreamScan scan =
      scan_stream(text, o.hash_bits, false, [&](const SparseDataset& chunk) { writer.append(chunk); });
  REQUIRE(writer.finish(scan.num_features, scan.num_fields, scan.report.lines, scan.report.skipped_lines));
}
}  // namespace

TEST_CASE(
    "stream: a first pass writes the whole load's cache byte for byte, which a cache stream reads back in chunks") {
  for (const TextFormat format : {TextFormat::Libsvm, TextFormat::Libffm}) {
    const std::string text = criteo_text(3000, format);
    const TempFile file("cached.txt", text), whole_load("whole.txt", text);
    const TempFile cache_file("cached.txt.skewbin", ""), whole_cache("whole.txt.skewbin", "");
    ReadOptions o;
    o.hash_bits = format == TextFormat::Libffm ? 14 : 0;  // hashed ids are cached as rows too
    o.format = format == TextFormat::Libffm ? "libffm" : "libsvm";
    write_cache_streamed(file.path, format, o);
    const SparseDataset expect = load_dataset(whole_load.path, o);  // parses, then writes its cache whole
    const std::string streamed_bytes = skew::read_file(cache_file.path),
                      whole_bytes = skew::read_file(whole_cache.path);
    REQUIRE(whole_bytes.size() > 200000);
    // The headers differ only in the source's mtime, ctime and inode (two files); the payloads
    // and counts match.
    constexpr std::size_t ctime_at = offsetof(CacheHeader, source_ctime), payload_at = sizeof(CacheHeader);
    CHECK(streamed_bytes.substr(0, 16) == whole_bytes.substr(0, 16));
    CHECK(streamed_bytes.substr(24, ctime_at - 24) == whole_bytes.substr(24, ctime_at - 24));
    CHECK(streamed_bytes.substr(payload_at) == whole_bytes.substr(payload_at));

    std::unique_ptr<CacheFile> cache =
        CacheFile::open(cache_file.path, cache_key(file.path, format, false, o.hash_bits), true);
    REQUIRE(cache);
    CacheStream stream(std::move(cache), 40 << 10, 3, "test budget");
    for (int pass = 0; pass < 2; ++pass) {
      const SparseDataset joined = join_pass(stream);
      CHECK(joined.row_ptr == expect.row_ptr);
      CHECK(joined.index == expect.index);
      CHECK(joined.field == expect.field);
      CHECK(joined.value == expect.value);
      CHECK(joined.label == expect.label);
    }
    CHECK(stream.chunks_read() >= 2 * 20);
    CHECK(stream.peak_ring_bytes() > stream.ring_budget() * 9 / 10);  // slots filled to their size
    CHECK(stream.peak_ring_bytes() <= stream.ring_budget());
    const StreamScan scan = scan_stream(stream, o.hash_bits, true);
    CHECK(scan.rows == 3000);
    CHECK(scan.num_features == expect.num_features);
    CHECK(scan.num_fields == expect.num_fields);
    CHECK(scan.counts == feature_counts(expect, expect.num_features));
  }
}

TEST_CASE(
    "stream: a damaged or stale cache is ignored or refused naming it, and a row larger than a slot names the budget") {
  const std::string text = criteo_text(1500, TextFormat::Libsvm);
  const TempFile file("damaged.txt", text), cache_file("damaged.txt.skewbin", "");
  write_cache_streamed(file.path, TextFormat::Libsvm, ReadOptions{});
  const CacheHeader key = cache_key(file.path, TextFormat::Libsvm, false, 0);
  const std::string bytes = skew::read_file(cache_file.path);
  REQUIRE(CacheFile::open(cache_file.path, key, true));
  CHECK_FALSE(
      CacheFile::open(cache_file.path, cache_key(file.path, TextFormat::Libsvm, false, 12), true));  // other hash_bits

  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  skew::write_file_atomic(cache_file.path, flipped);
  CHECK(CacheFile::open(cache_file.path, key, false));       // the header alone is fine
  CHECK_FALSE(CacheFile::open(cache_file.path, key, true));  // the checksum is not

  skew::write_file_atomic(cache_file.path, std::string_view(bytes).substr(0, bytes.size() - 6));
  CHECK_THAT(skew::test::error_of([&] { CacheFile::open(cache_file.path, key, true); }),
             Catch::Contains("corrupt data cache " + cache_file.path) && Catch::Contains("do not fit its"));

  std::string wide_row = "1 1:1\n0";
  for (int i = 0; i < 2000; ++i) {  // appended piecewise: GCC 12 warns on " " + s + ":1"
    wide_row += ' ';
    wide_row += std::to_string(i);
    wide_row += ":1";
  }
  skew::write_file_atomic(file.path, wide_row + "\n1 2:1\n");
  write_cache_streamed(file.path, TextFormat::Libsvm, ReadOptions{});
  // 4096 bytes a slot: a row of 2000 nonzeros (20000 bytes of arrays) cannot fit.
  CacheStream tiny(CacheFile::open(cache_file.path, cache_key(file.path, TextFormat::Libsvm, false, 0), true), 4096, 3,
                   "data.max_memory_mb = 1");
  CHECK_THAT(skew::test::error_of([&] { join_pass(tiny); }),
             Catch::Contains(cache_file.path + ": row 1 has 2000 nonzeros") &&
                 Catch::Contains("raise data.max_memory_mb = 1"));
}

TEST_CASE("stream: a cache that cannot be written warns and leaves nothing behind") {
  const std::string text = criteo_text(200, TextFormat::Libsvm);
  const TempFile file("unwritable.txt", text);
  const std::string cache = file.path + "/x.skewbin";  // under a file: no directory can be made
  CacheWriter writer(cache, cache_key(file.path, TextFormat::Libsvm, false, 0));
  writer.append(whole(text, TextFormat::Libsvm));
  CHECK_FALSE(writer.finish(5000, 1, 200, 0));
  CHECK_FALSE(std::filesystem::exists(cache));
}

TEST_CASE("format_text (wide_train --export) reads back to the same arrays") {
  SparseDataset d = generate_synthetic(parse_synthetic_spec("synthetic:criteo?rows=500&features=70000&seed=9"), 0, 500);
  for (std::size_t e = 0; e < d.value.size(); ++e) d.value[e] = float(e % 11) / 7.0f - 0.4f;  // shortest-exact digits
  for (const TextFormat format : {TextFormat::Libsvm, TextFormat::Libffm}) {
    const SparseDataset back = whole(format_text(d, format), format);
    CHECK(back.row_ptr == d.row_ptr);
    CHECK(back.index == d.index);
    CHECK(back.value == d.value);
    CHECK(back.label == d.label);
    if (format == TextFormat::Libffm) CHECK(back.field == d.field);
  }
  CHECK(std::count(d.label.begin(), d.label.end(), 1.0f) > 50);  // both labels present
  CHECK(std::count(d.label.begin(), d.label.end(), 0.0f) > 50);
}

TEST_CASE(
    "stream: a pass restricted to rows first..last (half open) yields those rows of the whole parse, text and cache") {
  const std::string text = criteo_text(3000, TextFormat::Libsvm);
  const TempFile file("share.txt", text), cache_file("share.txt.skewbin", "");
  const SparseDataset expect = whole(text, TextFormat::Libsvm);
  write_cache_streamed(file.path, TextFormat::Libsvm, ReadOptions{});
  TextStream from_text(file.path, TextFormat::Libsvm, ReadOptions{}, 96 << 10, 3, "test budget");
  CacheStream from_cache(CacheFile::open(cache_file.path, cache_key(file.path, TextFormat::Libsvm, false, 0), true),
                         40 << 10, 3, "test budget");
  // Inside one chunk, across several, to the end, and empty (a rank without rows).
  for (const auto& [first, last] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 9}, {777, 2222}, {2222, 3000}, {1500, 1500}}) {
    INFO("rows [" << first << ", " << last << ")");
    const SparseDataset want = slice_rows(expect, first, last);
    for (ChunkStream* stream : {static_cast<ChunkStream*>(&from_text), static_cast<ChunkStream*>(&from_cache)}) {
      stream->restrict_rows(first, last);
      const SparseDataset joined = join_pass(*stream, first);
      CHECK(joined.row_ptr == want.row_ptr);
      CHECK(joined.index == want.index);
      CHECK(joined.field == want.field);
      CHECK(joined.value == want.value);
      CHECK(joined.label == want.label);
    }
  }
}
