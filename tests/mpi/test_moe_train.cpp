// moe_train's loop on 2 ranks: learning below the unigram entropy, bit-exact resume from a
// checkpoint, and trace replay reproducing the recorded routing under another policy.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <unistd.h>

#include "lib/core/config.hpp"
#include "lib/core/safetensors.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/mpi_process_group.hpp"

using namespace skew;

namespace {

comm::ProcessGroup& world() {
  static comm::MpiProcessGroup group(MPI_COMM_WORLD);
  return group;
}

const char* kTiny = R"(
[data]
builtin_bytes = 60000
[model]
d_model = 32
heads = 2
layers = 2
seq_len = 32
[moe]
num_experts = 4
top_k = 2
d_ff = 64
jitter = 0.05
[train]
batch_size = 8
iterations = 40
warmup = 5
eval_interval = 0
eval_sequences = 16
log_interval = 0
)";

Json run(const Schema& schema, std::vector<std::string> overrides) {
  return moe::train(Config::parse_ini_text(schema, kTiny, "test", overrides), world());
}

// A scratch directory shared by the ranks (rank 0 names it).
std::string scratch(const std::string& name) {
  std::string dir = (std::filesystem::temp_directory_path() / ("skew_moe_" + name + "_" + std::to_string(::getpid()))).string();
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir), std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

std::vector<Json> read_jsonl(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("a short training run falls clearly below the unigram entropy", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const Json s = run(schema, {});
  INFO(s.dump());
  REQUIRE(s["final_val_loss"].get<double>() < s["unigram_entropy"].get<double>() - 0.4);
  REQUIRE(s["dropped"].get<std::int64_t>() == 0);
}

TEST_CASE("resume from a checkpoint continues bit-exactly", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const std::string a = scratch("straight"), b = scratch("resumed");
  const std::vector<std::string> common = {"--train.iterations=6", "--moe.policy=deepspeed", "--moe.capacity_factor=0.8"};
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
