// Inputs found by the fuzz harnesses in tests/fuzz (minimised), kept as tests: every reader must
// reject them with a skew::Error that names the file and, for text, the line and column.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/checksum.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/safetensors.hpp"
#include "lib/placement/trace.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew::wide;

namespace {
std::string text_error(const std::string& text, TextFormat format = TextFormat::Libsvm) {
  return skew::test::error_of([&] { parse_text(text, "fuzz.txt", format, ReadOptions{}, nullptr); });
}

// A libsvm file with its .skewbin cache written by the reader, whose bytes a test then patches
// (the source file is untouched, so the cache still matches it and is read).
struct CacheFixture {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("skew_fuzz_regression_" + std::to_string(getpid()));
  std::string source = (dir / "d.libsvm").string(), cache = source + ".skewbin";
  // "1 1:0.5 3:1\n0 2:1\n": 2 rows, 3 nonzeros. Layout: 104-byte header (rows at 32, nonzeros at 40,
  // features at 48, fields at 56, payload CRC-32C at 80, the source's ctime and inode at 88),
  // row offsets at 104, labels at 128, indices at 136, fields at 148, values at 154, the
  // frequency order (3 ids) at 166 and its length at 178; 186 bytes in all.
  CacheFixture() {
    std::filesystem::create_directories(dir);
    std::ofstream(source) << "1 1:0.5 3:1\n0 2:1\n";
    ReadReport r;
    load_dataset(source, ReadOptions{}, &r);
    REQUIRE_FALSE(r.from_cache);
    REQUIRE(std::filesystem::file_size(cache) == kBytes);
  }
  ~CacheFixture() { std::filesystem::remove_all(dir); }
  template <class T>
  void patch(std::size_t offset, T value) {
    std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(offset));
    f.write(reinterpret_cast<const char*>(&value), sizeof value);
    f.close();
    reseal();
  }
  // Reseals the payload's checksum, as a forger would: the range checks behind it must still
  // catch what the fuzzers found (an unsealed change is rebuilt, see test_wide_data.cpp).
  void reseal() const {
    const std::string bytes = skew::read_file(cache);
    const std::uint32_t crc = skew::crc32c(bytes.data() + kPayload, bytes.size() - kPayload);
    std::fstream g(cache, std::ios::in | std::ios::out | std::ios::binary);
    g.seekp(std::streamoff(offsetof(CacheHeader, payload_crc)));
    g.write(reinterpret_cast<const char*>(&crc), sizeof crc);
  }
  static constexpr std::size_t kPayload = 104, kBytes = 186;
  std::string error(int rank = 0, int world = 1) {
    ReadOptions o;
    o.rank = rank, o.world = world;
    return skew::test::error_of([&] { load_dataset(source, o); });
  }
};
}  // namespace

TEST_CASE("text readers reject non-finite values with file:line:column") {
  // fuzz_libsvm's find, minimised: the value was kept and fed NaN to training.
  CHECK_THAT(text_error("1 2:nan"), Catch::Contains("fuzz.txt:1:5") && Catch::Contains("not finite"));
  CHECK_THAT(text_error("1 1:1\n0 2:nan\n"), Catch::Contains("fuzz.txt:2:5") && Catch::Contains("not finite"));
  CHECK_THAT(text_error("1 7:-inf\n"), Catch::Contains("fuzz.txt:1:5") && Catch::Contains("not finite"));
  CHECK_THAT(text_error("0 1:2:infinity\n", TextFormat::Libffm), Catch::Contains("fuzz.txt:1:7"));
}

TEST_CASE("text readers reject labels other than 0/1 and -1/+1 with file:line:column") {
  CHECK_THAT(text_error("1 1:1\n\n2 1:1\n"),
             Catch::Contains("fuzz.txt:3:1") && Catch::Contains("label '2' out of range"));
  CHECK_THAT(text_error("nan 1:1\n"), Catch::Contains("fuzz.txt:1:1") && Catch::Contains("label 'nan'"));
  CHECK_THAT(text_error("0.5 0:1:1\n", TextFormat::Libffm), Catch::Contains("fuzz.txt:1:1"));
  const auto d =
      parse_text("+1 1:1\n-1.0 1:1\n0.0 1:1\n1e0 1:1\n", "ok.txt", TextFormat::Libsvm, ReadOptions{}, nullptr);
  CHECK(d.label == std::vector<float>{1, 0, 0, 1});
}

TEST_CASE("the binary cache checks its header's counts against the file before allocating") {
  CacheFixture f;
  SECTION("a byte missing from the row offsets (fuzz_skewbin's find: std::length_error, uncaught)") {
    std::string bytes(CacheFixture::kBytes, '\0');
    std::ifstream(f.cache, std::ios::binary).read(bytes.data(), CacheFixture::kBytes);
    bytes.erase(114, 1);
    std::ofstream(f.cache, std::ios::binary | std::ios::trunc) << bytes;
    CHECK_THAT(f.error(),
               Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("do not fit its 185 bytes"));
    bytes.erase(114, 20);  // shorter than the header's rows and nonzeros need
    std::ofstream(f.cache, std::ios::binary | std::ios::trunc) << bytes;
    CHECK_THAT(f.error(), Catch::Contains("corrupt data cache " + f.cache) &&
                              Catch::Contains("2 rows and 3 nonzeros in the header do not fit its 165 bytes"));
  }
  SECTION("rows far beyond the file") {
    f.patch<std::int64_t>(32, std::int64_t(1) << 40);
    CHECK_THAT(f.error(), Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("do not fit"));
  }
  SECTION("negative nonzeros") {
    f.patch<std::int64_t>(40, -3);
    CHECK_THAT(f.error(), Catch::Contains("corrupt data cache " + f.cache) && Catch::Contains("header out of range"));
  }
  SECTION("zero fields") {
    f.patch<std::int64_t>(56, 0);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("fields 0"));
  }
}

TEST_CASE("the binary cache checks row offsets, labels and nonzeros") {
  CacheFixture f;
  SECTION("a row offset past the nonzeros") {
    f.patch<std::int64_t>(112, 1000);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("row offset 1 is 1000"));
    CHECK_THAT(f.error(1, 2), Catch::Contains(f.cache) && Catch::Contains("row offset 1 is 1000"));
  }
  SECTION("row offsets going back") {
    f.patch<std::int64_t>(112, 3);
    f.patch<std::int64_t>(120, 2);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("row offset 2 is 2"));
  }
  SECTION("a label that is not 0 or 1") {
    f.patch<float>(132, NAN);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("row 1 has label nan"));
  }
  SECTION("a frequency order listing an id twice, one out of range, or longer than the file") {
    // The order is ids 1, 2, 3 (each once: ties by id).
    f.patch<std::uint32_t>(170, 1);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) &&
                              Catch::Contains("feature 1 at place 1 of the frequency order is listed twice"));
    f.patch<std::uint32_t>(170, 2);
    f.patch<std::uint32_t>(174, 4);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) &&
                              Catch::Contains("feature 4 at place 2 of the frequency order is beyond its 4 features"));
    f.patch<std::uint32_t>(174, 3);
    f.patch<std::int64_t>(178, 1000);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) &&
                              Catch::Contains("a frequency order of 1000 of 4 features do not fit its 186 bytes"));
  }
  SECTION("a frequency order under a header claiming 2^32 - 1 features: checked without a bit a feature") {
    f.patch<std::int64_t>(48, 4294967295);
    CHECK(load_dataset(f.source, ReadOptions{}).num_features == 4294967295);
    f.patch<std::uint32_t>(174, 1);  // ids 1, 2, 1
    CHECK_THAT(f.error(), Catch::Contains(f.cache) &&
                              Catch::Contains("feature 1 at place 2 of the frequency order is listed twice"));
    f.patch<std::uint32_t>(170, 4294967295u);  // ids 1, 2^32 - 1, 1: the id beyond comes first
    CHECK_THAT(
        f.error(),
        Catch::Contains(f.cache) &&
            Catch::Contains("feature 4294967295 at place 1 of the frequency order is beyond its 4294967295 features"));
    f.patch<std::uint32_t>(166, 4294967295u);  // listed twice and beyond: beyond, at its first place
    CHECK_THAT(f.error(), Catch::Contains("feature 4294967295 at place 0 of the frequency order is beyond"));
  }
  SECTION("an index outside the header's feature count") {
    f.patch<std::uint32_t>(140, 4);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("nonzero 1 is 0:4:"));
  }
  SECTION("an infinite value") {
    f.patch<float>(162, INFINITY);
    CHECK_THAT(f.error(), Catch::Contains(f.cache) && Catch::Contains("nonzero 2 is 0:2:inf"));
  }
}

namespace {
const std::string trace_path =
    (std::filesystem::temp_directory_path() / ("skew_fuzz_trace_" + std::to_string(getpid()) + ".jsonl")).string();
std::string trace_error(const std::string& text) {
  std::ofstream(trace_path) << text;
  const std::string what =
      skew::test::error_of([&] { skew::placement::read_trace_jsonl(trace_path, "tokens_per_expert"); });
  std::filesystem::remove(trace_path);
  return what;
}
}  // namespace

TEST_CASE("routing traces: counts must be non-negative integers in rectangular layers") {
  // Each was accepted (or, for 1e300, converted to int64 with undefined behaviour). The first is
  // fuzz_trace's own find (seed 2): a second layer narrower than the first.
  CHECK_THAT(trace_error("{\"iteration\": 0, \"tokens_per_expert\": [[10, 2, 5, 1], [3,3]]}\n{\"loss\": 2.5}\n"),
             Catch::Contains(trace_path + ":1:") && Catch::Contains("layers of 4 and 2 experts"));
  CHECK_THAT(trace_error("{\"tokens_per_expert\": [[1,2]]}\n{\"tokens_per_expert\": [[]]}\n"),
             Catch::Contains(trace_path + ":2:") && Catch::Contains("non-empty array"));
  // A count near int64's limit overflowed the simulator's sums (UBSan, bad-input catalogue).
  CHECK_THAT(trace_error("{\"tokens_per_expert\": [[10, 9223372036854775807]]}\n"),
             Catch::Contains(trace_path + ":1:") && Catch::Contains("counts in [0, 2^40]"));
  CHECK_THAT(trace_error("{\"tokens_per_expert\": [1e300, 2]}\n"),
             Catch::Contains(trace_path + ":1:") && Catch::Contains("got 1e+300"));
  CHECK_THAT(trace_error("\n{\"tokens_per_expert\": [-5, 2]}\n"),
             Catch::Contains(trace_path + ":2:") && Catch::Contains("got -5"));
}

TEST_CASE("safetensors: shape and data_offsets must hold integers") {
  const auto file = [](const std::string& header) {
    std::string bytes(8, '\0');
    for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return bytes + header;
  };
  // Both were converted to int64 with undefined behaviour (UBSan: float-cast-overflow).
  CHECK_THROWS_WITH(
      skew::parse_safetensors(file(R"({"w":{"dtype":"F32","shape":[1e300],"data_offsets":[0,0]}})"), "x.st"),
      Catch::Contains("corrupt safetensors file 'x.st'") && Catch::Contains("shape holds 1e+300"));
  CHECK_THROWS_WITH(
      skew::parse_safetensors(file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.5e30]}})"), "x.st"),
      Catch::Contains("'x.st'") && Catch::Contains("data_offsets holds 8.5e+30"));
  CHECK_THROWS_WITH(skew::parse_safetensors(file(R"({"w":{"dtype":"F32","shape":7,"data_offsets":[0,4]}})"), "x.st"),
                    Catch::Contains("'x.st'") && Catch::Contains("shape is not an array"));
}

TEST_CASE("config: integer lists reject items outside int64 instead of converting them") {
  skew::Schema schema("t", "t");
  schema.add_int_list("a.list", "", {std::numeric_limits<std::int64_t>::min(), skew::kMaxInt64}, "a list");
  // 1e300 and nan were cast to int64 with undefined behaviour; now refused as the file is read.
  for (const std::string item : {"1e300", "nan", "-1e19"}) {
    CHECK_THROWS_WITH(skew::Config::parse_ini_text(schema, "[a]\nlist = 1, " + item + "\n", "fuzz.ini"),
                      Catch::Contains("fuzz.ini:2") && Catch::Contains("not an integer"));
  }
}

TEST_CASE("config: --print-config of a key set empty in a file parses back empty") {
  // fuzz_config's find: "list = " printed as "list =   # from fuzz.ini:2", read back as the comment.
  skew::Schema schema("t", "t");
  schema.add_string("data.list", "1,2,3", "a list");
  const auto c = skew::Config::parse_ini_text(schema, "[data]\nlist = \n", "fuzz.ini");
  REQUIRE(c.get_string("data.list").empty());
  const auto again = skew::Config::parse_ini_text(schema, c.to_ini(), "again.ini");
  CHECK(again.get_string("data.list").empty());
}
