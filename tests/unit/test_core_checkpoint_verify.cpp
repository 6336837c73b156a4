// Verified checkpoint shards: CRC-32C against the published check value and a bit-at-a-time
// reference, a flipped data byte or a NaN rejected naming the file and tensor, intact shards
// loading bit-identically, shards without checksums still loading, and the prune order.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/checksum.hpp"
#include "core/fileio.hpp"
#include "tests/safetensors_damage.hpp"
#include "tests/unit/error_message.hpp"

namespace fs = std::filesystem;
using skew::CheckpointDir;
using skew::DType;
using skew::Tensor;
using skew::test::error_of;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = "/tmp/skew_core_test_ckpt_verify_" + name;
  fs::remove_all(dir);
  return dir;
}

// The CRC-32C definition itself, one bit at a time (no table), as the independent reference.
std::uint32_t crc32c_bitwise(const std::vector<unsigned char>& bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::vector<std::pair<std::string, Tensor>> sample_shard() {
  std::vector<float> w(64);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
  return {{"w", Tensor::from_vector(w, {8, 8})},
          {"m", Tensor::from_vector(std::vector<double>{0.5, -2.25, 1e-3, 7.0}, {4})},
          {"ids", Tensor::from_vector(std::vector<std::int32_t>{3, -1, 4, 1, 5}, {5})}};
}

}  // namespace

TEST_CASE("crc32c: the check value and a bit-at-a-time reference", "[checkpoint]") {
  const std::string check = "123456789";
  CHECK(skew::crc32c(check.data(), check.size()) == 0xe3069283u);
  std::mt19937 gen(7);
  std::vector<unsigned char> bytes(1237);
  for (auto& b : bytes) b = static_cast<unsigned char>(gen());
  const std::uint32_t whole = skew::crc32c(bytes.data(), bytes.size());
  CHECK(whole == crc32c_bitwise(bytes));
  // Continuing from a partial CRC gives the CRC of the whole.
  CHECK(skew::crc32c(bytes.data() + 500, bytes.size() - 500, skew::crc32c(bytes.data(), 500)) == whole);
  // Every length and alignment, so the 8-byte steps and the byte tail of the SSE4.2 path (where
  // the CPU has it) and the table-driven one agree with the definition.
  for (std::size_t offset = 0; offset < 9; ++offset)
    for (std::size_t length = 0; length < 40; ++length) {
      const std::vector<unsigned char> piece(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                                             bytes.begin() + static_cast<std::ptrdiff_t>(offset + length));
      const std::uint32_t expected = crc32c_bitwise(piece);
      CHECK(skew::crc32c(bytes.data() + offset, length) == expected);
      CHECK(skew::crc32c_table_driven(bytes.data() + offset, length) == expected);
    }
  // Long buffers take three interleaved 4 KiB streams (12 KiB rounds) and a tail: lengths on
  // either side of one and several rounds, at odd offsets.
  std::vector<unsigned char> large(40000);
  for (auto& b : large) b = static_cast<unsigned char>(gen());
  for (const std::size_t offset : {0, 3})
    for (const std::size_t length : {12287, 12288, 12289, 24576 + 8, 36864 + 7, 39990}) {
      const std::vector<unsigned char> piece(large.begin() + static_cast<std::ptrdiff_t>(offset),
                                             large.begin() + static_cast<std::ptrdiff_t>(offset + length));
      INFO("offset " << offset << " length " << length);
      CHECK(skew::crc32c(large.data() + offset, length) == crc32c_bitwise(piece));
    }
  CHECK(skew::crc32c(large.data() + 20000, 20000, skew::crc32c(large.data(), 20000)) == crc32c_bitwise(large));
}

TEST_CASE("crc32c_combine: pieces summed apart give the whole's CRC", "[checkpoint]") {
  std::mt19937 gen(11);
  std::vector<unsigned char> bytes(50000);
  for (auto& b : bytes) b = static_cast<unsigned char>(gen());
  const std::uint32_t whole = crc32c_bitwise(bytes);
  // Split points at the ends, at odd places, around the 12 KiB interleaved rounds.
  for (const std::size_t split : {0, 1, 7, 4096, 12287, 12288, 30001, 49999, 50000}) {
    INFO("split " << split);
    const std::uint32_t a = skew::crc32c(bytes.data(), split),
                        b = skew::crc32c(bytes.data() + split, bytes.size() - split);
    CHECK(skew::crc32c_combine(a, b, bytes.size() - split) == whole);
  }
  // Several pieces folded in order, the way a load summed out of order adds its pieces up.
  std::uint32_t folded = 0;
  for (std::size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 5) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    folded = skew::crc32c_combine(folded, skew::crc32c(bytes.data() + at, n), n);
  }
  CHECK(folded == whole);
  // A long run of zero bytes (the powers of x beyond 2^32 bits): combine against the direct sum.
  std::vector<unsigned char> zeros(std::size_t(3) << 20, 0);
  const std::uint32_t head = skew::crc32c(bytes.data(), 100);
  CHECK(skew::crc32c_combine(head, skew::crc32c(zeros.data(), zeros.size()), zeros.size()) ==
        skew::crc32c(zeros.data(), zeros.size(), head));
  // The combined CRC changes with the second piece's length (a wrong shift would not show on
  // pieces of equal length only).
  CHECK(skew::crc32c_combine(head, 0, 5) != skew::crc32c_combine(head, 0, 6));
}

TEST_CASE("checkpoint shards: intact loads bit-identically, a flipped byte names the tensor", "[checkpoint]") {
  const std::string dir = fresh_dir("flip");
  const auto tensors = sample_shard();
  CheckpointDir ck(dir, 0, 1, 2);
  ck.write_shard(4, tensors, {});
  ck.commit(4);
  const auto shard = ck.read_shard(4);
  REQUIRE(shard.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CHECK(shard.tensors[i].first == tensors[i].first);
    REQUIRE(shard.tensors[i].second.nbytes() == tensors[i].second.nbytes());
    CHECK(std::memcmp(shard.tensors[i].second.raw(), tensors[i].second.raw(), tensors[i].second.nbytes()) == 0);
  }
  CHECK(shard.metadata.at("crc32c:w") == skew::crc32c_hex(tensors[0].second));
  // A byte in the middle of "m": the file still parses, only the checksum can tell.
  skew::test::flip_tensor_byte(ck.rank_file(4), "m", 13);
  const std::string error = error_of([&] { ck.read_shard(4); });
  CHECK_THAT(error, Catch::Contains(ck.rank_file(4)) && Catch::Contains("tensor m fails its checksum"));
}

TEST_CASE("checkpoint shards: a non-finite float value is rejected on load", "[checkpoint]") {
  const std::string dir = fresh_dir("nan");
  auto tensors = sample_shard();
  tensors[0].second.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  Tensor half = Tensor::empty({3}, DType::BF16);
  half.copy_from(Tensor::from_vector(std::vector<float>{1.0f, -std::numeric_limits<float>::infinity(), 2.0f}, {3}));
  CheckpointDir ck(dir, 0, 1, 2);
  ck.write_shard(1, tensors, {});  // its checksums match: the value itself is the fault
  CHECK_THAT(error_of([&] { ck.read_shard(1); }),
             Catch::Contains(ck.rank_file(1)) && Catch::Contains("tensor w holds a non-finite value at element 5"));
  ck.write_shard(2, {{"h", half}}, {});
  CHECK_THAT(error_of([&] { ck.read_shard(2); }), Catch::Contains("tensor h holds a non-finite value at element 1"));
  CHECK(skew::first_non_finite(sample_shard()[1].second) == -1);
}

TEST_CASE("checkpoint shards written without checksums still load", "[checkpoint]") {
  const std::string dir = fresh_dir("legacy");
  CheckpointDir ck(dir, 0, 1, 2);
  ck.write_shard(3, sample_shard(), {});
  // Rewritten as before this change: the same tensors, no checksum keys.
  skew::save_safetensors(ck.rank_file(3), sample_shard(), {{"step", "3"}});
  const auto shard = ck.read_shard(3);
  CHECK(shard.get("m").to_float_vector() == std::vector<float>{0.5f, -2.25f, 1e-3f, 7.0f});
  // A checksum key naming a tensor the shard lacks is a fault, not an old file.
  std::map<std::string, std::string> sums;
  for (const auto& [name, t] : sample_shard()) sums["crc32c:" + name] = skew::crc32c_hex(t);
  sums["crc32c:gone"] = "00000000";
  skew::save_safetensors(ck.rank_file(3), sample_shard(), sums);
  CHECK_THAT(error_of([&] { ck.read_shard(3); }), Catch::Contains("records a checksum for tensor gone"));
  // Checksums recorded for some tensors only: the others are faults too.
  sums.erase("crc32c:gone"), sums.erase("crc32c:m");
  skew::save_safetensors(ck.rank_file(3), sample_shard(), sums);
  CHECK_THAT(error_of([&] { ck.read_shard(3); }), Catch::Contains("tensor m has no recorded checksum"));
}

TEST_CASE("checkpoint pruning: an interrupted prune leaves no complete step with missing shards", "[checkpoint]") {
  const std::string dir = fresh_dir("prune");
  const auto write_step = [&](std::int64_t step, int keep) {
    for (int r = 0; r < 2; ++r) CheckpointDir(dir, r, 2, keep).write_shard(step, sample_shard(), {});
    CheckpointDir(dir, 0, 2, keep).commit(step);
  };
  write_step(1, 3);
  write_step(2, 3);
  // A prune of step 1 killed after its first act (the marker removed), shards still there:
  fs::remove(dir + "/step_00000001/COMPLETE");
  CheckpointDir rank1(dir, 1, 2, 3);
  CHECK(rank1.complete_steps() == std::vector<std::int64_t>{2});
  CHECK(rank1.written_world_size(2) == 2);
  skew::write_file_atomic(dir + "/step_00000002/COMPLETE", "world_size=two\n");
  CHECK_THAT(error_of([&] { rank1.written_world_size(2); }),
             Catch::Contains(dir + "/step_00000002/COMPLETE does not record a world size"));
  skew::write_file_atomic(dir + "/step_00000002/COMPLETE", "world_size=2\n");
  // The next commit clears the leftover; retention (keep 1) prunes step 2 whole.
  write_step(3, 1);
  CHECK_FALSE(fs::exists(dir + "/step_00000001"));
  CHECK_FALSE(fs::exists(dir + "/step_00000002"));
  CHECK(rank1.complete_steps() == std::vector<std::int64_t>{3});
  // A marked step with a shard missing (damage from outside) fails to read, naming the file.
  fs::remove(rank1.rank_file(3));
  CHECK_THAT(error_of([&] { rank1.read_shard(3); }), Catch::Contains(rank1.rank_file(3)));
}
