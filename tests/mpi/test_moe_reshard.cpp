// moe_train resuming at another world size (run under 4 ranks, sub-groups for the other sizes):
// a checkpoint of 2 ranks loads at 1 and at 4 ranks with every dense parameter, expert and AdamW
// moment equal to the saved bytes, and trains on to completion; flexmoe and a world size the
// experts do not divide are refused, naming why.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/fileio.hpp"
#include "lib/moe/session.hpp"
#include "tests/mpi/test_moe_util.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;
using namespace skew_moe_test;
namespace fs = std::filesystem;

namespace {
// The world's first `size` ranks as a group; null on the others.
std::unique_ptr<comm::MpiProcessGroup> first_ranks(int size) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world().rank() < size ? 0 : MPI_UNDEFINED, world().rank(), &comm);
  return comm == MPI_COMM_NULL ? nullptr : std::make_unique<comm::MpiProcessGroup>(comm);
}

moe::MoeTrainOptions tiny(const Schema& schema, const std::vector<std::string>& overrides) {
  return moe_train_options(Config::parse_ini_text(schema, kTiny, "test", overrides));
}

// A copy of checkpoint directory `from` (rank 0 copies; every rank returns its name).
std::string copy_of(const std::string& from, const std::string& suffix) {
  const std::string to = from + suffix;
  if (world().rank() == 0) fs::copy(from, to, fs::copy_options::recursive);
  MPI_Barrier(MPI_COMM_WORLD);
  return to;
}
}  // namespace

TEST_CASE("a 2-rank checkpoint resumes at 1 and 4 ranks with its exact state", "[moe]") {
  REQUIRE(world().size() == 4);
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("reshard");
  const std::vector<std::string> common = {"--train.iterations=6", "--output.checkpoint_interval=3"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  if (auto two = first_ranks(2))
    moe::train(tiny(schema, {"--train.iterations=3", "--output.checkpoint_dir=" + dir}), *two);
  MPI_Barrier(MPI_COMM_WORLD);
  const Json index = Json::parse(read_file(dir + "/step_00000003/index.json"));
  REQUIRE(index["world_size"] == 2);
  for (const int size : {1, 4}) {
    const std::string copy = copy_of(dir, "_np" + std::to_string(size));
    if (auto group = first_ranks(size)) {
      INFO("resuming at " << size << " ranks");
      const moe::MoeTrainOptions config =
          tiny(schema, with({"--output.checkpoint_dir=" + copy, "--output.resume=true"}));
      moe::Session s(config, *group);
      CHECK(moe::restore(s) == 3);
      // Each tensor this rank now holds equals, byte for byte, the one its old shard saved.
      std::vector<double> experts = {0};
      for (const auto& [name, t] : moe::save_state(s.model->network(), *s.adam)) {
        if (name.ends_with(".placement")) continue;
        // The 2-rank block placement put experts 0-1 on rank 0 and 2-3 on rank 1; the dense state
        // is everywhere (rank 0's copy is read).
        const int expert = name.starts_with("dense.") ? 0 : std::stoi(name.substr(name.find(".e") + 2));
        const std::string file = CheckpointDir::shard_name(expert / 2);
        const TensorFile old_shard = load_safetensors(copy + "/step_00000003/" + file);
        const Tensor& saved = old_shard.get(name);
        CHECK((saved.nbytes() == t.nbytes() && std::memcmp(saved.raw(), t.raw(), t.nbytes()) == 0));
        if (!name.starts_with("dense.")) ++experts[0];
      }
      // Gathered: all 4 experts of both layers with w, m, v, each exactly once over the ranks.
      group->allreduce(comm::view(experts), comm::ReduceOp::Sum);
      CHECK(experts[0] == 4 * 2 * 3);
      // And the run trains on to the end at the new size.
      const Json resumed = moe::train(config, *group);
      CHECK(std::isfinite(resumed["final_loss"].get<double>()));
      CHECK(resumed["ranks"] == size);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (world().rank() == 0) CHECK(fs::exists(copy + "/step_00000006/COMPLETE"));
  }
  // Three ranks cannot split 4 experts evenly: refused.
  if (auto three = first_ranks(3))
    CHECK_THAT(test::error_of([&] {
                 moe::train(tiny(schema, with({"--output.checkpoint_dir=" + dir, "--output.resume=true"})), *three);
               }),
               Catch::Contains("moe.num_experts = 4 cannot be shared evenly by the 3 ranks (each holds the same "
                               "number of experts): set moe.num_experts to a multiple of 3 (6, say) or launch a "
                               "number of ranks that divides 4"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0)
    for (const auto& name : {dir, dir + "_np1", dir + "_np4"}) fs::remove_all(name);
}

TEST_CASE("a flexmoe checkpoint is not re-sharded: its placement state is the old world size's", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("reshard_flex");
  const std::vector<std::string> flex = {"--train.iterations=2", "--moe.policy=flexmoe", "--placement.gemm_flops=1e6",
                                         "--output.checkpoint_dir=" + dir};
  if (auto two = first_ranks(2)) moe::train(tiny(schema, flex), *two);
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::string> resume = flex;
  resume.push_back("--output.resume=true");
  CHECK_THAT(
      test::error_of([&] { run(schema, resume); }),
      Catch::Contains("was written by 2 ranks under moe.policy=flexmoe") && Catch::Contains("resume it with 2 ranks"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) fs::remove_all(dir);
}

TEST_CASE("routing traces are not carried to another world size: one file per old rank", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("reshard_trace");
  const std::vector<std::string> args = {"--train.iterations=2", "--output.checkpoint_dir=" + dir};
  if (auto two = first_ranks(2)) moe::train(tiny(schema, args), *two);
  MPI_Barrier(MPI_COMM_WORLD);
  for (const std::string key : {"moe.save_trace", "moe.replay_trace"}) {
    std::vector<std::string> resume = args;
    resume.push_back("--output.resume=true");
    resume.push_back("--" + key + "=" + dir + "/trace");
    CHECK_THAT(test::error_of([&] { run(schema, resume); }),
               Catch::Contains(key + " is one file per rank") && Catch::Contains("written by 2 ranks"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) fs::remove_all(dir);
}
