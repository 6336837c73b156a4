// Checkpoint directories: per-rank shards, COMPLETE marker, retention, world-size check.
// Ranks are simulated by one CheckpointDir per rank in a single process.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;
using skew::CheckpointDir;
using skew::Tensor;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = "/tmp/skew_core_test_ckpt_" + name;
  fs::remove_all(dir);
  return dir;
}

void write_step(const std::string& dir, int world, int keep, std::int64_t step) {
  for (int r = 0; r < world; ++r) {
    CheckpointDir ck(dir, r, world, keep);
    const float v = static_cast<float>(step) + 0.25f * static_cast<float>(r);
    ck.write_shard(step, {{"w", Tensor::from_vector(std::vector<float>{v, -v}, {2})}},
                   {{"note", "rank" + std::to_string(r)}});
  }
  CheckpointDir(dir, 0, world, keep).commit(step);
}

}  // namespace

TEST_CASE("checkpoint: shards round trip with their metadata", "[checkpoint]") {
  const std::string dir = fresh_dir("roundtrip");
  CheckpointDir none(dir, 0, 2, 3);
  CHECK(none.latest_complete() == -1);  // no directory yet
  write_step(dir, 2, 3, 10);
  for (int r = 0; r < 2; ++r) {
    CheckpointDir ck(dir, r, 2, 3);
    REQUIRE(ck.latest_complete() == 10);
    CHECK(ck.rank_file(10) == dir + "/step_00000010/rank_0000" + std::to_string(r) + ".safetensors");
    const auto shard = ck.read_shard(10);
    const auto w = shard.get("w").to_float_vector();
    CHECK(w == std::vector<float>{10.0f + 0.25f * r, -(10.0f + 0.25f * r)});
    CHECK(shard.metadata.at("step") == "10");
    CHECK(shard.metadata.at("rank") == std::to_string(r));
    CHECK(shard.metadata.at("world_size") == "2");
    CHECK(shard.metadata.at("note") == "rank" + std::to_string(r));
  }
  CHECK(none.dir() == dir);
}

TEST_CASE("checkpoint: only steps with a COMPLETE marker count", "[checkpoint]") {
  const std::string dir = fresh_dir("complete");
  write_step(dir, 2, 5, 1);
  // Step 2: only rank 0 wrote its shard; commit refuses, and resume stays at step 1.
  CheckpointDir rank0(dir, 0, 2, 5);
  rank0.write_shard(2, {{"w", Tensor::from_vector(std::vector<float>{2}, {1})}}, {});
  CHECK_THROWS_WITH(rank0.commit(2), Catch::Contains("checkpoint step 2 is missing the shard of rank 1"));
  CHECK_FALSE(fs::exists(dir + "/step_00000002/COMPLETE"));
  CHECK(rank0.latest_complete() == 1);
  // A non-numeric step-like directory is ignored.
  fs::create_directories(dir + "/step_abc");
  std::ofstream(dir + "/step_abc/COMPLETE") << "world_size=2\n";
  CHECK(rank0.latest_complete() == 1);
  // Committing a later step clears the torn step 2 but leaves complete and unrelated entries.
  write_step(dir, 2, 5, 3);
  CHECK_FALSE(fs::exists(dir + "/step_00000002"));
  CHECK(fs::exists(dir + "/step_00000001/COMPLETE"));
  CHECK(fs::exists(dir + "/step_abc"));
  CHECK(rank0.latest_complete() == 3);
}

TEST_CASE("checkpoint: retention keeps the newest complete steps", "[checkpoint]") {
  const std::string dir = fresh_dir("retention");
  for (std::int64_t step : {5, 10, 15, 20, 25}) write_step(dir, 2, 2, step);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"step_00000020", "step_00000025"});
  CHECK(CheckpointDir(dir, 1, 2, 2).latest_complete() == 25);
  CHECK_THROWS_WITH(CheckpointDir(dir, 0, 2, 0), Catch::Contains("must keep at least 1 step"));
}

TEST_CASE("checkpoint: resuming with another world size is refused", "[checkpoint]") {
  const std::string dir = fresh_dir("worldsize");
  write_step(dir, 2, 3, 7);
  CheckpointDir four(dir, 0, 4, 3);
  CHECK_THROWS_WITH(four.latest_complete(),
                    Catch::Contains("was written by a job with world_size=2 but this job has world_size=4") &&
                        Catch::Contains("resume with the same number of ranks"));
}
