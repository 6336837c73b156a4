// 64-bit feature ids and data.hash_bits: the hash against pinned values and against the
// balls-into-bins closed form, the parser's id checks, hashed parsing, synthetic data and the
// binary cache keyed by hash_bits.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <unordered_set>

#include "core/error.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew::wide;

namespace {

SparseDataset parse_hashed(const std::string& text, int hash_bits, TextFormat format = TextFormat::Libsvm) {
  ReadOptions o;
  o.hash_bits = hash_bits;
  return parse_text(text, "ids.txt", format, o, nullptr);
}

std::string error_of(const std::string& text, int hash_bits = 0) {
  return skew::test::error_of([&] { parse_hashed(text, hash_bits); });
}

// Occupied rows after n distinct ids hash into m rows, if the hash acts as uniform random:
// E = m (1 - (1 - 1/m)^n) and Var = m (m-1) (1 - 2/m)^n + m (1 - 1/m)^n - m^2 (1 - 1/m)^(2n)
// (indicator of each row empty; pairs of rows both empty).
struct Occupancy {
  double mean, sd;
};
Occupancy expected_occupancy(double m, double n) {
  const double one_empty = std::pow(1 - 1 / m, n), two_empty = std::pow(1 - 2 / m, n);
  const double var = m * (m - 1) * two_empty + m * one_empty - m * m * one_empty * one_empty;
  return {m * (1 - one_empty), std::sqrt(var)};
}

std::int64_t occupied_rows(const std::vector<std::uint64_t>& ids, int bits) {
  std::vector<bool> used(std::size_t(1) << bits, false);
  for (std::uint64_t id : ids) used[hashed_feature_row(id, bits)] = true;
  return std::count(used.begin(), used.end(), true);
}

}  // namespace

TEST_CASE("feature hash: fmix64 and the rows of pinned ids, computed apart from the code") {
  // MurmurHash3's fmix64 test values and row = fmix64(id ^ 0x9e3779b97f4a7c15) >> (64 - bits),
  // evaluated with Python's exact integers (mod 2^64): they pin the mapping across releases,
  // since a saved model's rows mean nothing under another hash.
  CHECK(fmix64(1) == 0xb456bcfc34c2cb2cull);
  CHECK(fmix64(0x0123456789abcdefull) == 0x87cbfbfe89022ceaull);
  CHECK(hashed_feature_row(0, 28) == 164234863u);
  CHECK(hashed_feature_row(1, 28) == 39548767u);
  CHECK(hashed_feature_row((std::uint64_t(1) << 40) + 7, 20) == 969835u);
  CHECK(hashed_feature_row(~std::uint64_t(0), 16) == 15574u);
  CHECK(hashed_feature_row(std::uint64_t(1) << 63, 28) == 18615159u);
  CHECK(hashed_feature_row(123456789, 1) == 1u);
}

TEST_CASE("feature hash: occupied rows match the balls-into-bins closed form for random and structured ids") {
  // m = 2^16 rows, n = 2^16 ids: mean 41426.8, sd 79.8 (0.2 %). A hash that kept low bits, or
  // mixed high bits poorly, misses by thousands on the structured sets.
  const int bits = 16;
  const std::size_t n = std::size_t(1) << 16;
  const Occupancy want = expected_occupancy(double(1 << bits), double(n));
  REQUIRE(want.mean == Approx(41426.84).epsilon(1e-6));
  REQUIRE(want.sd == Approx(79.82).epsilon(1e-3));
  std::mt19937_64 gen(20261204);
  std::unordered_set<std::uint64_t> distinct;
  while (distinct.size() < n) distinct.insert(gen());
  const std::vector<std::uint64_t> random_ids(distinct.begin(), distinct.end());
  std::vector<std::uint64_t> consecutive, high_bits_only, strided;
  for (std::uint64_t j = 0; j < n; ++j) {
    consecutive.push_back((std::uint64_t(1) << 40) + j);  // Criteo-style ids past 2^32
    high_bits_only.push_back(j << 48);                    // differ only above bit 47
    strided.push_back(j * (std::uint64_t(1) << 16));      // low 16 bits all zero
  }
  for (const auto& [name, ids] : {std::pair{"random", &random_ids},
                                  {"consecutive", &consecutive},
                                  {"high bits only", &high_bits_only},
                                  {"strided", &strided}}) {
    const std::int64_t got = occupied_rows(*ids, bits);
    INFO(name << ": " << got << " rows occupied, expected " << want.mean << " +- " << want.sd);
    CHECK(std::fabs(double(got) - want.mean) < 4 * want.sd);
  }
  // A nearly full table (n = 4m): the empty fraction is e^-4 within a few sd.
  std::vector<std::uint64_t> many;
  for (std::uint64_t j = 0; j < 4 * (std::uint64_t(1) << 12); ++j) many.push_back(j * 0x100000001ull);
  const Occupancy full = expected_occupancy(4096, double(many.size()));
  CHECK(std::fabs(double(occupied_rows(many, 12)) - full.mean) < 4 * full.sd);
}

TEST_CASE("64-bit ids: hashed into 2^bits rows at parse, libsvm and libffm alike") {
  const std::uint64_t big = (std::uint64_t(1) << 40) + 3;
  const auto d = parse_hashed("1 " + std::to_string(big) + ":0.5 18446744073709551615:1 +7:2\n0 0:1\n", 20);
  CHECK(d.index == std::vector<std::uint32_t>{hashed_feature_row(big, 20), hashed_feature_row(~std::uint64_t(0), 20),
                                              hashed_feature_row(7, 20), hashed_feature_row(0, 20)});
  CHECK(d.num_features == (1 << 20));  // the whole row space, whatever the ids
  CHECK(d.value == std::vector<float>{0.5f, 1, 2, 1});
  const auto ffm = parse_hashed("1 3:" + std::to_string(big) + ":1 0:7:1\n", 10, TextFormat::Libffm);
  CHECK(ffm.index == std::vector<std::uint32_t>{hashed_feature_row(big, 10), hashed_feature_row(7, 10)});
  CHECK(ffm.field == std::vector<std::uint16_t>{3, 0});
  // Parallel chunks hash alike.
  std::string text;
  for (int i = 0; i < 200000; ++i) text += "1 " + std::to_string((std::uint64_t(i) << 34) + 11) + ":1\n";
  ReadOptions serial, parallel;
  serial.hash_bits = parallel.hash_bits = 24;
  parallel.threads = 3;
  CHECK(parse_text(text, "p", TextFormat::Libsvm, serial, nullptr).index ==
        parse_text(text, "p", TextFormat::Libsvm, parallel, nullptr).index);
}

TEST_CASE("64-bit ids: too large, negative or non-numeric ids and hash_bits out of range are refused, named") {
  CHECK_THAT(error_of("1 1:1\n1 18446744073709551616:1\n", 20),
             Catch::Contains("ids.txt:2:3") && Catch::Contains("does not fit 64 bits"));
  CHECK_THAT(error_of("1 99999999999999999999999:1\n", 20), Catch::Contains("ids.txt:1:3"));
  CHECK_THAT(error_of("0 2:1 -5:1\n", 20), Catch::Contains("ids.txt:1:7") && Catch::Contains("negative"));
  CHECK_THAT(error_of("0 2:1\n\n1 abc:1\n", 20), Catch::Contains("ids.txt:3:3") && Catch::Contains("index:value"));
  CHECK_THAT(error_of("0 0x10:1\n", 20), Catch::Contains("ids.txt:1:3"));
  // Unhashed, an id past 2^32 - 2 cannot be a row: the error names the key that fixes it.
  CHECK_THAT(error_of("1 4294967296:1\n"), Catch::Contains("ids.txt:1:3") && Catch::Contains("data.hash_bits"));
  for (int bad : {-1, kMaxHashBits + 1, 64})
    CHECK_THAT(error_of("1 1:1\n", bad), Catch::Contains("data.hash_bits = " + std::to_string(bad)));
}

TEST_CASE("hash_bits: synthetic data hashes its generated ids, and the cache records hash_bits") {
  const std::string spec = "synthetic:criteo?rows=300&features=4000&seed=5";
  ReadOptions raw, hashed;
  hashed.hash_bits = 12;
  const SparseDataset a = load_dataset(spec, raw), b = load_dataset(spec, hashed);
  REQUIRE(a.nnz() == b.nnz());
  CHECK(b.num_features == 4096);
  for (std::size_t e = 0; e < std::size_t(a.nnz()); ++e) REQUIRE(b.index[e] == hashed_feature_row(a.index[e], 12));

  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_hash_cache_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "d.libsvm").string();
  {
    std::ofstream out(path);
    for (std::uint64_t i = 0; i < 50; ++i) out << i % 2 << " " << i * 977 << ":1 " << i + 3 << ":0.5\n";
  }
  const auto load = [&](int bits, bool& from_cache) {
    ReadOptions o;
    o.hash_bits = bits;
    ReadReport report;
    SparseDataset d = load_dataset(path, o, &report);
    from_cache = report.from_cache;
    return d;
  };
  bool cached = true;
  const SparseDataset unhashed = load(0, cached);
  CHECK_FALSE(cached);
  // A cache of raw ids is not reused for hashed reading (and the other way round): re-parsed.
  const SparseDataset first = load(9, cached);
  CHECK_FALSE(cached);
  const SparseDataset second = load(9, cached);
  CHECK(cached);
  CHECK(second.index == first.index);
  CHECK(second.num_features == 512);
  for (std::size_t e = 0; e < unhashed.index.size(); ++e)
    REQUIRE(first.index[e] == hashed_feature_row(unhashed.index[e], 9));
  load(0, cached);
  CHECK_FALSE(cached);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a saved model records hash_bits, and a model file whose hash_bits its rows cannot hold is refused") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_hash_model_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  WideModel m = WideModel::create({skew::kernels::WideKind::FM, 4096, 1, 2}, 3, 0.1f);
  m.hash_bits = 12;
  const std::string good = (dir / "good.safetensors").string(), bad = (dir / "bad.safetensors").string();
  m.save(good);
  const WideModel back = WideModel::load(good);
  CHECK(back.hash_bits == 12);
  CHECK(back.params == m.params);
  m.hash_bits = 13;  // 2^13 rows hashed into a 4096-row model would index past it
  m.save(bad);
  CHECK_THAT(skew::test::error_of([&] { WideModel::load(bad); }),
             Catch::Contains(bad) && Catch::Contains("metadata hash_bits is '13'"));
  std::filesystem::remove_all(dir);
}
