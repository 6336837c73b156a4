// moe_train on 2 ranks with damaged checkpoints and diverging runs: a corrupt shard of the newest
// step makes both ranks resume from the step before (same final loss as a straight run), no
// verifying step stops the run, a resumed run appends to its metrics, and a NaN/inf loss ends
// the run naming the iteration without checkpointing it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "tests/mpi/test_moe_util.hpp"
#include "tests/safetensors_damage.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;
using namespace skew_moe_test;
namespace fs = std::filesystem;

namespace {
const std::vector<std::string> kCommon = {"--train.iterations=6", "--moe.policy=deepspeed",
                                          "--moe.capacity_factor=0.8"};
std::vector<std::string> with(std::vector<std::string> extra) {
  extra.insert(extra.end(), kCommon.begin(), kCommon.end());
  return extra;
}
std::string shard(const std::string& dir, int step, int rank) {
  return dir + "/step_0000000" + std::to_string(step) + "/rank_0000" + std::to_string(rank) + ".safetensors";
}
}  // namespace

TEST_CASE("a corrupt shard of the newest step: both ranks resume from the step before", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string a = scratch("verify_straight"), c = scratch("verify_fallback");
  const Json straight = run(schema, with({"--output.checkpoint_dir=" + a}));
  run(schema, with({"--output.checkpoint_dir=" + c, "--output.checkpoint_interval=3"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) test::flip_tensor_byte(shard(c, 6, 1), "dense.w", 101);
  MPI_Barrier(MPI_COMM_WORLD);
  // Only rank 1 can see the damage; rank 0 must not load step 6 alone.
  const Json resumed = run(schema, with({"--output.checkpoint_dir=" + c, "--output.resume=true"}));
  REQUIRE(resumed["final_loss"].get<double>() == straight["final_loss"].get<double>());
  // Resumed from step 3, the run wrote step 6 again: the straight run's bytes.
  const TensorFile x = load_safetensors(shard(a, 6, world().rank())), y = load_safetensors(shard(c, 6, world().rank()));
  for (const auto& [key, sum] : x.metadata)
    if (key.rfind("crc32c:", 0) == 0) CHECK(y.metadata.at(key) == sum);
  MPI_Barrier(MPI_COMM_WORLD);
  // A directory whose only step fails on rank 1: every rank stops, rank 1 naming file and tensor.
  if (world().rank() == 0) test::flip_tensor_byte(shard(a, 6, 1), "dense.m", 7);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string error = test::error_of([&] {
    run(schema, with({"--output.checkpoint_dir=" + a, "--output.resume=true"}));
  });
  CHECK_THAT(error, Catch::Contains("no complete checkpoint step in " + a + " verifies on every rank"));
  if (world().rank() == 1)
    CHECK_THAT(error, Catch::Contains(shard(a, 6, 1)) && Catch::Contains("tensor dense.m fails its checksum"));
  else
    CHECK_THAT(error, Catch::Contains("step 6: failed on another rank"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) fs::remove_all(a), fs::remove_all(c);
}

TEST_CASE("a resumed run appends to output.metrics, dropping what the crashed run wrote after its checkpoint",
          "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("verify_metrics");
  run(schema, with({"--output.metrics=" + dir + "/a.jsonl"}));
  // Phase 1 checkpoints at 3 and 6 and records iterations 0-5; it "crashes" after iteration 5's
  // record but before step 6 completes (the step is removed), mid-way through one more line.
  run(schema, with({"--output.checkpoint_dir=" + dir + "/ckpt", "--output.checkpoint_interval=3",
                    "--output.metrics=" + dir + "/b.jsonl"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) {
    fs::remove_all(dir + "/ckpt/step_00000006");
    OutputFile(dir + "/b.jsonl", OutputFile::Mode::Append).write(std::string("{\"iter\": 6, \"lo"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Phase 2 resumes at 3: iterations 0-2 stay from phase 1, 3-5 are its own.
  run(schema, with({"--output.checkpoint_dir=" + dir + "/ckpt", "--output.resume=true",
                    "--output.metrics=" + dir + "/b.jsonl"}));
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/a.jsonl"), b = read_jsonl(dir + "/b.jsonl");
    REQUIRE(a.size() == 6);
    REQUIRE(b.size() == 6);
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(b[i]["iter"] == a[i]["iter"]);
      CHECK(b[i]["loss"].get<double>() == a[i]["loss"].get<double>());
    }
    // A line that is no metrics record is an error naming the file and line, not dropped.
    write_file_atomic(dir + "/c.jsonl", "{\"iter\": 0}\n[1, 2]\n");
    CHECK_THAT(test::error_of([&] { keep_jsonl_records_before(dir + "/c.jsonl", "iter", 1); }),
               Catch::Contains(dir + "/c.jsonl:2 is not a metrics record"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) fs::remove_all(dir);
}

TEST_CASE("a NaN or inf loss ends the run naming the iteration, unsaved", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("verify_diverge");
  // Weights of 1e30 overflow the first logits.
  CHECK_THAT(test::error_of([&] { run(schema, with({"--model.init_std=1e30"})); }),
             Catch::Contains("training diverged at iteration 0: the loss is"));
  // A learning rate of 1e30 makes the first update overflow the next forward pass.
  const std::string error = test::error_of([&] {
    run(schema, with({"--train.lr=1e30", "--output.checkpoint_dir=" + dir, "--output.checkpoint_interval=1"}));
  });
  std::smatch m;
  REQUIRE(
      std::regex_search(error, m, std::regex("training diverged at iteration ([0-9]+): the (loss|gradient norm) is ")));
  const int it = std::stoi(m[1]);
  CHECK(it >= 1);
  MPI_Barrier(MPI_COMM_WORLD);
  // Every iteration before it was checkpointed; the diverged one was not.
  CheckpointDir ckpt(dir, world().rank(), world().size(), 2);
  CHECK(ckpt.complete_steps().back() == it);
  CHECK_FALSE(fs::exists(dir + "/step_0000000" + std::to_string(it + 1)));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) fs::remove_all(dir);
}
