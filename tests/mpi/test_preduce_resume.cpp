// preduce_train's checkpoints under mpirun: all-reduce resumes bit-exactly against a straight
// run; the asynchronous modes, whose groups depend on timing, resume the state they saved.
#include <mpi.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/preduce/checkpoint.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/mpi_process_group.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;

namespace {

std::shared_ptr<comm::ProcessGroup> world() {
  return std::make_shared<comm::MpiProcessGroup>(MPI_COMM_WORLD);
}

// A directory shared by the ranks (rank 0 names and creates it).
std::string scratch(const std::string& name) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("skew_preres_" + name + "_" + std::to_string(::getpid()))).string();
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world()->rank() == 0) std::filesystem::remove_all(dir), std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

void remove_on_rank0(const std::string& path) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world()->rank() == 0) std::filesystem::remove_all(path);
  MPI_Barrier(MPI_COMM_WORLD);
}

preduce::TrainOptions small(const std::string& mode) {
  preduce::TrainOptions o;
  o.mode = mode;
  o.hidden = {16};
  o.rows = 1200;
  o.test_rows = 400;
  o.dim = 8;
  o.classes = 3;
  o.separation = 5.0;
  o.lr = 0.2;
  o.eval_interval_s = 0.02;
  o.log_interval = 0;
  o.eager_deadline_ms = 1.0;
  o.eager_sync_every = 3;
  o.hetero.slowdown = {1, 2};
  o.hetero.base_ms = 0.2;
  return o;
}

std::string shard(const std::string& dir, std::int64_t step, int rank) {
  char name[64];
  std::snprintf(name, sizeof name, "/step_%08lld/rank_%05d.safetensors", static_cast<long long>(step), rank);
  return dir + name;
}

// The named tensor of two shards, byte for byte.
void require_same_tensor(const TensorFile& x, const TensorFile& y, const std::string& name) {
  INFO(name);
  const Tensor &a = x.get(name), &b = y.get(name);
  REQUIRE(a.nbytes() == b.nbytes());
  REQUIRE(std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

// "w<id>", built piecewise: GCC 12 reports a false -Wrestrict on "w" + std::to_string(id).
std::string worker_prefix(int id) {
  std::string name = "w";
  name += std::to_string(id);
  return name;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("allreduce resumed mid-way ends bit-identical to a straight run", "[preduce][resume]") {
  auto w = world();
  const std::string dir = scratch("allreduce");
  const int me = w->rank();
  preduce::TrainOptions straight = small("allreduce");
  straight.steps = 30;
  straight.checkpoint_dir = dir + "/a";
  straight.metrics = dir + "/a.%r.jsonl";
  const auto a = preduce::train_mpi(w, straight);

  preduce::TrainOptions cut = straight;
  cut.checkpoint_dir = dir + "/b";
  cut.metrics = dir + "/b.%r.jsonl";
  cut.checkpoint_interval = 10;
  preduce::train_mpi(w, cut);
  // As if it had crashed after its checkpoint at 10: its metrics went on to step 29.
  remove_on_rank0(dir + "/b/step_00000030");
  remove_on_rank0(dir + "/b/step_00000020");
  preduce::TrainOptions resumed = cut;
  resumed.resume = true;
  const auto b = preduce::train_mpi(w, resumed);

  const TensorFile x = load_safetensors(shard(dir + "/a", 30, me)), y = load_safetensors(shard(dir + "/b", 30, me));
  const std::string id = worker_prefix(me);
  require_same_tensor(x, y, id + ".params");
  require_same_tensor(x, y, id + ".counters");  // step, version, group counts
  require_same_tensor(x, y, id + ".accum");
  // The metrics file holds every step once, with the straight run's losses and versions.
  const auto ma = read_jsonl(dir + "/a." + std::to_string(me) + ".jsonl");
  const auto mb = read_jsonl(dir + "/b." + std::to_string(me) + ".jsonl");
  REQUIRE(ma.size() == 30);
  REQUIRE(mb.size() == 30);
  for (std::size_t s = 0; s < ma.size(); ++s) {
    INFO("step " << s);
    CHECK(mb[s]["step"].get<std::int64_t>() == static_cast<std::int64_t>(s));
    CHECK(mb[s]["loss"].get<double>() == ma[s]["loss"].get<double>());
    CHECK(mb[s]["version"].get<std::int64_t>() == ma[s]["version"].get<std::int64_t>());
  }
  REQUIRE(a.has_value() == (me == 0));
  if (a) {
    REQUIRE(b.has_value());
    CHECK(b->average_model == a->average_model);
    CHECK(b->summary["final_accuracy_mean"] == a->summary["final_accuracy_mean"]);
    CHECK(b->summary["average_model_accuracy"] == a->summary["average_model_accuracy"]);
    CHECK(b->summary["final_accuracy_mean"].get<double>() > 0.9);
  }
  remove_on_rank0(dir);
}

TEST_CASE("asynchronous modes resume the state they saved and run on", "[preduce][resume]") {
  auto w = world();
  for (std::string mode : {"preduce", "eager", "adpsgd", "local", "preduce-rank"}) {
    INFO(mode);
    const bool dedicated = mode == "preduce-rank";
    const std::string dir = scratch(mode);
    preduce::TrainOptions o = small(dedicated ? "preduce" : mode);
    o.dedicated_controller = dedicated;
    o.steps = 20;
    o.checkpoint_dir = dir + "/ckpt";
    o.metrics = dir + "/m.%r.jsonl";
    const auto first = preduce::train_mpi(w, o);
    const bool controlled = mode != "adpsgd" && mode != "local";
    const int workers = w->size() - (dedicated ? 1 : 0);
    const bool is_worker = !(dedicated && w->rank() == 0);
    const TensorFile saved = load_safetensors(shard(o.checkpoint_dir, 20, w->rank()));
    const std::string id = worker_prefix(w->rank() - (dedicated ? 1 : 0));
    if (is_worker) CHECK(saved.get(id + ".counters").data<std::int64_t>()[0] == 20);  // the step
    comm::FormerState controller;
    if (controlled && w->rank() == 0) {
      controller = preduce::load_controller(saved);
      CHECK(controller.parent.size() == static_cast<std::size_t>(workers));
      if (workers > 1) CHECK(controller.groups_formed >= 20);  // 20 readies per worker, groups of <= workers
    }

    // Resumed with nothing left to do: the summary is of the loaded models, which therefore
    // equal the saved ones (the average model bit for bit, the accuracies).
    preduce::TrainOptions again = o;
    again.resume = true;
    const auto loaded = preduce::train_mpi(w, again);
    REQUIRE(first.has_value() == loaded.has_value());
    if (first) {
      CHECK(loaded->average_model == first->average_model);
      CHECK(loaded->summary["final_accuracy_mean"] == first->summary["final_accuracy_mean"]);
    }

    // Resumed to 40 steps: completes, every worker's metrics hold steps 0..39 once, and the
    // controller went on from its saved history.
    preduce::TrainOptions longer = again;
    longer.steps = 40;
    const auto done = preduce::train_mpi(w, longer);
    if (done) CHECK(done->summary["final_accuracy_mean"].get<double>() > 0.8);
    if (is_worker) {
      const auto lines = read_jsonl(dir + "/m." + std::to_string(w->rank()) + ".jsonl");
      REQUIRE(lines.size() == 40);
      for (std::size_t s = 0; s < lines.size(); ++s) CHECK(lines[s]["step"].get<std::size_t>() == s);
    }
    if (controlled && w->rank() == 0 && workers > 1) {
      const comm::FormerState later = preduce::load_controller(load_safetensors(shard(o.checkpoint_dir, 40, 0)));
      CHECK(later.groups_formed >= controller.groups_formed + 20);
    }
    remove_on_rank0(dir);
  }
}

TEST_CASE("a checkpoint of another mode or model is refused, naming the key", "[preduce][resume]") {
  auto w = world();
  const std::string dir = scratch("mismatch");
  preduce::TrainOptions o = small("allreduce");
  o.steps = 5;
  o.checkpoint_dir = dir;
  preduce::train_mpi(w, o);
  preduce::TrainOptions other_mode = o;
  other_mode.resume = true;
  other_mode.mode = "local";
  CHECK_THAT(test::error_of([&] { preduce::train_mpi(w, other_mode); }),
             Catch::Contains("sync.mode = \"allreduce\", this run has \"local\"; refusing to resume"));
  preduce::TrainOptions other_model = o;
  other_model.resume = true;
  other_model.hidden = {17};
  CHECK_THAT(test::error_of([&] { preduce::train_mpi(w, other_model); }), Catch::Contains("model.hidden"));
  remove_on_rank0(dir);
}
