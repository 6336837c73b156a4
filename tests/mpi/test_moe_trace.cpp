// moe_train's routing traces (moe.save_trace / moe.replay_trace) on 2 ranks: the header records
// what a replay depends on and a replay under other settings is refused naming both values; a
// trace without the header is refused; a resumed run appends exactly the iterations after its
// checkpoint.
#include <catch2/catch.hpp>

#include "core/fileio.hpp"
#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

namespace {

std::string rank_file(const std::string& stem) {
  return stem + ".rank" + std::to_string(world().rank());
}

std::string first_line(const std::string& path) {
  const std::string text = read_file(path);
  return text.substr(0, text.find('\n'));
}

}  // namespace

TEST_CASE("a routing trace's header records the run, a replay under other settings names both values", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("trace_header");
  run(schema, {"--train.iterations=3", "--moe.top_k=1", "--moe.save_trace=" + dir + "/t"});
  // kTiny: 2 MoE layers (layers = 2, moe_every = 1), 8 sequences of 32 tokens per rank, seed 1.
  REQUIRE(first_line(rank_file(dir + "/t")) ==
          "skew routing trace 1: arch=gpt top_k=1 experts=4 moe_layers=2 ranks=2 rank=" +
              std::to_string(world().rank()) + " batch_size=8 seq_len=32 tokens_per_step=256 seed=1 first_iteration=0");
  // The header line, then 3 iterations x 2 layers x 256 tokens x top_k 1 int32 ids.
  REQUIRE(std::filesystem::file_size(rank_file(dir + "/t")) ==
          first_line(rank_file(dir + "/t")).size() + 1 + 3 * 2 * 256 * 4);
  const std::string replay = "--moe.replay_trace=" + dir + "/t";
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=3", "--moe.top_k=2", replay}),
                      Catch::Contains("was recorded with moe.top_k = 1") &&
                          Catch::Contains("this run has moe.top_k = 2") && Catch::Contains(rank_file("t")));
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=3", "--moe.top_k=1", "--train.batch_size=4", replay}),
                      Catch::Contains("train.batch_size = 8") && Catch::Contains("train.batch_size = 4"));
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=3", "--moe.top_k=1", "--train.seed=2", replay}),
                      Catch::Contains("train.seed = 1") && Catch::Contains("train.seed = 2"));
  // The same settings under another policy replay it.
  REQUIRE_NOTHROW(run(schema, {"--train.iterations=3", "--moe.top_k=1", "--moe.policy=fastermoe", replay}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a routing trace without the header (a raw id stream) is refused, not guessed at", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("trace_raw");
  run(schema, {"--train.iterations=2", "--moe.save_trace=" + dir + "/t"});
  const std::string text = read_file(rank_file(dir + "/t"));
  write_file_atomic(rank_file(dir + "/raw"), text.substr(text.find('\n') + 1));  // the old format
  MPI_Barrier(MPI_COMM_WORLD);
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=2", "--moe.replay_trace=" + dir + "/raw"}),
                      Catch::Contains(rank_file("raw") + " has no routing-trace header") &&
                          Catch::Contains("record it again with moe.save_trace"));
  // A header whose first iteration is not a number: refused, not read as 0.
  std::string damaged = text;
  damaged.replace(damaged.find("first_iteration=0"), 17, "first_iteration=x");
  write_file_atomic(rank_file(dir + "/damaged"), damaged);
  MPI_Barrier(MPI_COMM_WORLD);
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=2", "--moe.replay_trace=" + dir + "/damaged"}),
                      Catch::Contains(rank_file("damaged") + "'s header records no first_iteration"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a resumed run's trace equals an uninterrupted run's, even after a crash past the checkpoint", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("trace_resume");
  const std::vector<std::string> common = {"--train.iterations=6", "--output.checkpoint_interval=3"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  run(schema, with({"--output.checkpoint_dir=" + dir + "/a", "--moe.save_trace=" + dir + "/straight"}));
  // A run whose trace holds all 6 iterations but whose step-6 checkpoint is lost: the resumed
  // run replays iterations 3-5 and must rewrite them, not append a second copy.
  run(schema, with({"--output.checkpoint_dir=" + dir + "/b", "--moe.save_trace=" + dir + "/resumed"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir + "/b/step_00000006");
  MPI_Barrier(MPI_COMM_WORLD);
  run(schema,
      with({"--output.checkpoint_dir=" + dir + "/b", "--output.resume=true", "--moe.save_trace=" + dir + "/resumed"}));
  REQUIRE(read_file(rank_file(dir + "/resumed")) == read_file(rank_file(dir + "/straight")));
  // A trace recorded under other settings is not appended to.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir + "/b/step_00000006");
  MPI_Barrier(MPI_COMM_WORLD);
  REQUIRE_THROWS_WITH(
      run(schema, with({"--output.checkpoint_dir=" + dir + "/b", "--output.resume=true",
                        "--moe.save_trace=" + dir + "/resumed", "--train.seed=7"})),
      Catch::Contains("moe.save_trace") && Catch::Contains("train.seed = 1") && Catch::Contains("train.seed = 7"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}
