// moe_train's loop on 2 ranks: bit-exact resume from a checkpoint, trace replay reproducing the
// recorded routing under another policy, and FlexMoE placement changes keeping the model function.
#include <catch2/catch.hpp>
#include <cstring>

#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

TEST_CASE("resume from a checkpoint continues bit-exactly", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const std::string a = scratch("straight"), b = scratch("resumed");
  const std::vector<std::string> common = {"--train.iterations=6", "--moe.policy=deepspeed",
                                           "--moe.capacity_factor=0.8"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  const Json straight = run(schema, with({"--output.checkpoint_dir=" + a}));
  // A run checkpointing at 3 and 6; drop step 6 and resume from step 3 to the end.
  const std::string c = b;
  run(schema, with({"--output.checkpoint_dir=" + c, "--output.checkpoint_interval=3"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(c + "/step_00000006");
  MPI_Barrier(MPI_COMM_WORLD);
  const Json resumed = run(schema, with({"--output.checkpoint_dir=" + c, "--output.resume=true"}));
  REQUIRE(resumed["final_loss"].get<double>() == straight["final_loss"].get<double>());
  const std::string shard = "/step_00000006/rank_0000" + std::to_string(world().rank()) + ".safetensors";
  const TensorFile x = load_safetensors(a + shard), y = load_safetensors(c + shard);
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (std::size_t i = 0; i < x.tensors.size(); ++i) {
    REQUIRE(x.tensors[i].first == y.tensors[i].first);
    REQUIRE(x.tensors[i].second.nbytes() == y.tensors[i].second.nbytes());
    REQUIRE(std::memcmp(x.tensors[i].second.raw(), y.tensors[i].second.raw(), x.tensors[i].second.nbytes()) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(a), std::filesystem::remove_all(b);
}

TEST_CASE("a replayed routing trace gives another policy identical traffic", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const std::string dir = scratch("trace");
  run(schema, {"--train.iterations=5", "--moe.save_trace=" + dir + "/trace", "--output.metrics=" + dir + "/a.jsonl"});
  run(schema, {"--train.iterations=5", "--moe.replay_trace=" + dir + "/trace", "--output.metrics=" + dir + "/b.jsonl",
               "--moe.policy=deepspeed", "--moe.drop_tokens=false"});
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/a.jsonl"), b = read_jsonl(dir + "/b.jsonl");
    REQUIRE(a.size() == 5);
    REQUIRE(b.size() == 5);
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i]["tokens_per_expert"] == b[i]["tokens_per_expert"]);
    REQUIRE(b.back()["padded"].get<std::int64_t>() > 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("flexmoe re-places experts without changing the model function", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const std::string dir = scratch("flexmoe");
  const std::vector<std::string> common = {"--train.iterations=8", "--moe.aux_weight=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  run(schema, with({"--output.metrics=" + dir + "/static.jsonl"}));
  const Json flex = run(schema, with({"--moe.policy=flexmoe", "--placement.interval=2", "--placement.threshold=1.0",
                                      "--placement.gemm_flops=1e6", "--output.metrics=" + dir + "/flex.jsonl"}));
  REQUIRE(flex["placement_changes"].get<std::int64_t>() > 0);
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/static.jsonl"), b = read_jsonl(dir + "/flex.jsonl");
    REQUIRE(a.size() == b.size());
    // Same routing and same math; only the order of floating-point sums over replicas differs.
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i]["tokens_per_expert"] == b[i]["tokens_per_expert"]);
      REQUIRE(b[i]["loss"].get<double>() == Approx(a[i]["loss"].get<double>()).epsilon(1e-4));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}
