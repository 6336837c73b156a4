// Reader edge cases, the binary cache, rank slices and the synthetic generator.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "lib/wide/dataset.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew::wide;

namespace {
SparseDataset parse(const std::string& text, TextFormat format = TextFormat::Libsvm, bool skip = false,
                    ReadReport* report = nullptr) {
  ReadOptions o;
  o.skip_bad_lines = skip;
  return parse_text(text, "mem.txt", format, o, report);
}
std::string error_of(const std::string& text, TextFormat format = TextFormat::Libsvm) {
  return skew::test::error_of([&] { parse(text, format); });
}
}  // namespace

TEST_CASE("libsvm: labels, comments, empty lines, CRLF") {
  const auto d = parse("# header comment\n+1 3:0.5 7:2\r\n\n   \n-1 1:1 # trailing\n0 2:1.5e1\n1\n");
  REQUIRE(d.rows() == 4);
  CHECK(d.label == std::vector<float>{1, 0, 0, 1});
  CHECK(d.row_ptr == std::vector<std::int64_t>{0, 2, 3, 4, 4});
  CHECK(d.index == std::vector<std::uint32_t>{3, 7, 1, 2});
  CHECK(d.value == std::vector<float>{0.5f, 2.0f, 1.0f, 15.0f});
  CHECK(d.num_features == 8);
}

TEST_CASE("libffm: fields and sizes") {
  const auto d = parse("1 0:5:1 2:9:0.5\n0 1:3:1\n", TextFormat::Libffm);
  REQUIRE(d.rows() == 2);
  CHECK(d.field == std::vector<std::uint16_t>{0, 2, 1});
  CHECK(d.index == std::vector<std::uint32_t>{5, 9, 3});
  CHECK(d.num_fields == 3);
  CHECK(d.num_features == 10);
}

TEST_CASE("malformed lines name file, line and column") {
  CHECK_THAT(error_of("1 1:1\n1 2:x\n"), Catch::Contains("mem.txt:2:5") && Catch::Contains("bad value"));
  CHECK_THAT(error_of("1 1:1\n\nabc 1:1\n"), Catch::Contains("mem.txt:3:1") && Catch::Contains("bad label"));
  CHECK_THAT(error_of("1 1:1 7\n"), Catch::Contains("mem.txt:1:7") && Catch::Contains("index:value"));
  CHECK_THAT(error_of("1 1:1\n", TextFormat::Libffm), Catch::Contains("mem.txt:1:3"));
  CHECK_THAT(error_of("1 99999999999:1\n"), Catch::Contains("exceeds 4294967294") && Catch::Contains("mem.txt:1:3"));
}

TEST_CASE("huge but valid indices are kept") {
  const auto d = parse("1 4294967294:1\n");
  CHECK(d.index[0] == 4294967294u);
  CHECK(d.num_features == 4294967295ll);
}

TEST_CASE("skip_bad_lines counts and reports") {
  ReadReport report;
  const auto d = parse("1 1:1\nbad\n0 2:1\n1 3:q\n", TextFormat::Libsvm, true, &report);
  CHECK(d.rows() == 2);
  CHECK(report.skipped_lines == 2);
  CHECK(report.lines == 4);
  CHECK_THAT(report.first_bad_line, Catch::Contains("mem.txt:2:1"));
}

TEST_CASE("parallel parse equals serial parse, line numbers stay global") {
  std::string text;
  for (int i = 0; i < 300000; ++i)
    text += std::to_string(i % 2) + " " + std::to_string(i % 977) + ":1 " + std::to_string(1000 + i % 13) + ":0.5\n";
  ReadOptions serial, parallel;
  parallel.threads = 3;
  const auto a = parse_text(text, "big", TextFormat::Libsvm, serial, nullptr);
  const auto b = parse_text(text, "big", TextFormat::Libsvm, parallel, nullptr);
  CHECK(a.row_ptr == b.row_ptr);
  CHECK(a.index == b.index);
  CHECK(a.label == b.label);
  text += "1 5:zz\n";
  try {
    parse_text(text, "big", TextFormat::Libsvm, parallel, nullptr);
    FAIL("no error");
  } catch (const skew::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("big:300001:5"));
  }
}

TEST_CASE("binary cache round trip and rank slices") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_cache_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "d.libsvm").string();
  std::filesystem::remove(path + ".skewbin");
  {
    std::ofstream out(path);
    for (int i = 0; i < 101; ++i)
      out << (i % 3 == 0 ? "+1" : "-1") << " " << i << ":1 " << (i * 7) % 50 + 200 << ":2\n";
  }
  ReadOptions o;
  ReadReport first, second;
  const auto full = load_dataset(path, o, &first);
  CHECK_FALSE(first.from_cache);
  CHECK(std::filesystem::exists(path + ".skewbin"));
  const auto again = load_dataset(path, o, &second);
  CHECK(second.from_cache);
  CHECK(again.index == full.index);
  CHECK(again.label == full.label);
  // The whole file's frequency order, by brute force: ids 0..100 once each, ids 200..249 two or
  // three times; by descending count, ties by id.
  std::map<std::uint32_t, int> count;
  for (const std::uint32_t f : full.index) ++count[f];
  std::vector<std::uint32_t> by_count;
  for (const auto& [f, n] : count) by_count.push_back(f);
  std::sort(by_count.begin(), by_count.end(),
            [&](std::uint32_t a, std::uint32_t b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
  REQUIRE(by_count.size() == 151);
  CHECK(first.frequency_order == by_count);   // counted as the cache was written
  CHECK(second.frequency_order == by_count);  // read from it
  std::vector<std::uint32_t> joined;
  std::int64_t rows = 0;
  for (int r = 0; r < 3; ++r) {
    o.rank = r;
    o.world = 3;
    ReadReport slice;
    const auto part = load_dataset(path, o, &slice);
    CHECK(slice.frequency_order == by_count);  // every rank gets the whole file's
    CHECK(part.first_row == rows);
    CHECK(part.num_features == full.num_features);
    rows += part.rows();
    joined.insert(joined.end(), part.index.begin(), part.index.end());
  }
  CHECK(rows == 101);
  CHECK(joined == full.index);
  std::filesystem::remove_all(dir);
}

TEST_CASE("synthetic criteo: fields, determinism, slices, zipf skew") {
  const auto spec = parse_synthetic_spec("synthetic:criteo?rows=4000&features=20000&alpha=1.2&seed=3");
  CHECK(spec.rows == 4000);
  const auto all = generate_synthetic(spec, 0, 4000);
  CHECK(all.nnz() == 4000 * 39);
  CHECK(all.num_fields == 39);
  const auto tail = generate_synthetic(spec, 3000, 4000);
  CHECK(std::equal(tail.index.begin(), tail.index.end(), all.index.begin() + 3000 * 39));
  std::vector<int> counts(20000, 0);
  for (auto i : all.index) {
    REQUIRE(i < 20000u);
    ++counts[i];
  }
  std::sort(counts.rbegin(), counts.rend());
  CHECK(counts[0] > 100 * std::max(1, counts[5000]));  // heavy head, light tail
  double positives = 0;
  for (float y : all.label) positives += y;
  CHECK(positives > 200);
  CHECK(positives < 3800);
  CHECK_THROWS_WITH(parse_synthetic_spec("synthetic:criteo?rows=10&bogus=1"), Catch::Contains("bogus"));
}

TEST_CASE("a file loads (mapped) exactly as its text parses, and an empty file is an error naming it") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_map_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "d.libffm").string(), empty = (dir / "e.libsvm").string();
  std::string text;
  for (int i = 0; i < 3000; ++i)
    text += std::to_string(i % 2) + " " + std::to_string(i % 7) + ":" + std::to_string(i * 13 % 9973) + ":0." +
            std::to_string(i % 1000) + " 3:" + std::to_string(i) + ":1\r\n";
  std::ofstream(path, std::ios::binary) << text;
  std::ofstream(empty, std::ios::binary).flush();
  ReadOptions o;
  o.use_cache = false;
  o.threads = 2;
  const SparseDataset loaded = load_dataset(path, o), parsed = parse_text(text, path, TextFormat::Libffm, o, nullptr);
  REQUIRE(loaded.rows() == 3000);
  CHECK(loaded.index == parsed.index);
  CHECK(loaded.field == parsed.field);
  CHECK(loaded.value == parsed.value);
  CHECK(loaded.label == parsed.label);
  CHECK(loaded.row_ptr == parsed.row_ptr);
  CHECK_THAT(skew::test::error_of([&] { load_dataset(empty, o); }),
             Catch::Contains(empty) && Catch::Contains("holds no rows"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("files without rows and directories are refused naming the path, with or without the cache") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_norows_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "sub");
  for (const bool cache : {true, false}) {
    ReadOptions o;
    o.use_cache = cache;
    for (const std::string text : {"", "# a\n# b\n", "\n  \n\t\n", "x\ny 1:1\n"}) {
      const std::string path = (dir / "t.libsvm").string();
      std::filesystem::remove(path + ".skewbin");
      std::ofstream(path, std::ios::binary) << text;
      o.skip_bad_lines = text[0] == 'x';  // every line malformed and skipped: no rows either
      INFO("text '" << text << "', cache " << cache);
      for (int attempt = 0; attempt < 2; ++attempt)  // the second may read a cache the first wrote
        CHECK_THAT(skew::test::error_of([&] { load_dataset(path, o); }),
                   Catch::Contains(path) && Catch::Contains("holds no rows"));
    }
    CHECK_THAT(skew::test::error_of([&] { load_dataset((dir / "sub").string(), o); }),
               Catch::Contains((dir / "sub").string()) && Catch::Contains("is a directory"));
    CHECK_THAT(skew::test::error_of([&] { load_dataset("", o); }), Catch::Contains("empty path"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a byte flipped inside a cached value fails the cache's checksum: rebuilt from the text, same data") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_cache_crc_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "d.libsvm").string(), cache = path + ".skewbin";
  std::string text;
  for (int i = 0; i < 500; ++i)
    text += std::to_string(i % 2) + " " + std::to_string(i % 97) + ":0." + std::to_string(i % 9 + 1) + " 400:1\n";
  std::ofstream(path, std::ios::binary) << text;
  ReadOptions o;
  o.use_cache = false;
  const SparseDataset parsed = load_dataset(path, o);  // the reference: no cache involved
  o.use_cache = true;
  load_dataset(path, o);  // writes the cache
  REQUIRE(std::filesystem::exists(cache));
  // The cache ends with the frequency order (98 ids here: 392 bytes) and its length (8 bytes,
  // checked against the file's size instead). Inside the order, the last values and the indices:
  for (const std::size_t from_end : {9, 300, 403, 409, 4400}) {
    std::string bytes = skew::read_file(cache);
    REQUIRE(bytes.size() > from_end);
    bytes[bytes.size() - from_end] ^= 0x40;  // 0.x becomes another finite, in-range value
    std::ofstream(cache, std::ios::binary | std::ios::trunc) << bytes;
    ReadReport rebuilt, again;
    const SparseDataset d = load_dataset(path, o, &rebuilt);
    INFO("byte " << from_end << " from the end");
    CHECK_FALSE(rebuilt.from_cache);  // the damaged cache was not used
    CHECK(d.value == parsed.value);
    CHECK(d.index == parsed.index);
    CHECK(d.label == parsed.label);
    const SparseDataset e = load_dataset(path, o, &again);  // the rewritten cache verifies
    CHECK(again.from_cache);
    CHECK(e.value == parsed.value);
    CHECK(e.index == parsed.index);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a source edited with its size and mtime kept (touch -d) is re-parsed, not read from its old cache") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_cache_key_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "d.libsvm").string();
  ReadOptions o;
  o.use_cache = true;
  for (const bool in_place : {true, false}) {  // sed -i's rename (another inode), or a write in place
    INFO((in_place ? "written in place" : "replaced by a rename"));
    skew::write_file_atomic(path, "1 3:0.5 7:1\n0 2:1\n");
    ReadReport written, cached, edited;
    load_dataset(path, o, &written);  // writes the cache
    REQUIRE_FALSE(written.from_cache);
    load_dataset(path, o, &cached);
    REQUIRE(cached.from_cache);
    const auto mtime = std::filesystem::last_write_time(path);
    const std::string text = "0 3:0.5 7:1\n1 2:1\n";  // both labels flipped: the same size
    if (in_place)
      std::fstream(path, std::ios::in | std::ios::out | std::ios::binary) << text;
    else
      skew::write_file_atomic(path, text);
    std::filesystem::last_write_time(path, mtime);  // what touch -d does: utimensat
    REQUIRE(std::filesystem::file_size(path) == text.size());
    const SparseDataset d = load_dataset(path, o, &edited);
    CHECK_FALSE(edited.from_cache);
    CHECK(d.label == std::vector<float>{0.0f, 1.0f});  // the new text's labels, not the cache's {1, 0}
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a pipe (a FIFO, <(...)) is read as it comes with data.cache = false, with the cache, a clear refusal") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_fifo_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "d.libsvm").string(), fifo = (dir / "d.fifo").string();
  std::string text;
  for (int i = 0; i < 3000; ++i)  // more than a pipe's 64 KiB buffer
    text += std::to_string(i % 2) + " " + std::to_string(i % 89 + 1) + ":0." + std::to_string(i % 7 + 1) + " 97:1\n";
  skew::write_file_atomic(file, text);
  ReadOptions o;
  o.use_cache = false;
  const SparseDataset want = load_dataset(file, o);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << text; });
  ReadReport report;
  const SparseDataset got = load_dataset(fifo, o, &report);
  writer.join();
  CHECK(report.total_rows == 3000);
  CHECK(got.label == want.label);
  CHECK(got.row_ptr == want.row_ptr);
  CHECK(got.index == want.index);
  CHECK(got.value == want.value);
  CHECK_FALSE(std::filesystem::exists(fifo + ".skewbin"));
  // Refused before the pipe is opened (no writer needed): the cache, and several ranks.
  o.use_cache = true;
  CHECK_THAT(skew::test::error_of([&] { load_dataset(fifo, o); }),
             Catch::Contains(fifo + " is a pipe") && Catch::Contains("set data.cache=false"));
  o.use_cache = false;
  o.world = 2;
  CHECK_THAT(skew::test::error_of([&] { load_dataset(fifo, o); }),
             Catch::Contains(fifo + " is a pipe") && Catch::Contains("not by each of 2 ranks"));
  std::filesystem::remove_all(dir);
}
