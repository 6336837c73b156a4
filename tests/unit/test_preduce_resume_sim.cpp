// preduce_train --simulate resumed from a checkpoint ends bit-identical to a straight run with
// the same checkpoint steps (a checkpoint is a barrier in the simulated run as in the real one).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "core/safetensors.hpp"
#include "lib/preduce/trainer.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;

namespace {

std::string scratch(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("skew_preres_sim_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

preduce::TrainOptions small(const std::string& variant) {
  preduce::TrainOptions o;
  o.simulate = true;
  o.mode = variant.starts_with("preduce") ? "preduce" : variant;
  o.overlap = variant == "preduce-overlap";
  o.refresh_staleness = o.overlap ? 2 : 0;
  o.reduce_gradient = variant == "preduce-gradient";
  o.sim_workers = 5;
  o.group_size = 2;
  o.isolation_bound = 2;
  o.eager_sync_every = 3;
  o.hidden = {16};
  o.rows = 1000;
  o.test_rows = 300;
  o.dim = 8;
  o.classes = 3;
  o.lr = 0.2;
  o.steps = 100;
  o.eval_interval_s = 0.01;
  o.log_interval = 0;
  o.hetero.slowdown = {1, 1, 3};
  o.hetero.jitter = "exp";
  o.hetero.jitter_ms = 0.5;
  o.checkpoint_interval = 25;
  o.keep = 10;
  return o;
}

std::string step_dir(const std::string& dir, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "/step_%08d", step);
  return dir + name;
}

}  // namespace

TEST_CASE("simulated runs resume bit-exactly in every mode", "[preduce][resume]") {
  for (std::string variant :
       {"allreduce", "preduce", "preduce-gradient", "preduce-overlap", "eager", "adpsgd", "local"}) {
    INFO(variant);
    const std::string dir = scratch(variant);
    preduce::TrainOptions straight = small(variant);
    straight.checkpoint_dir = dir + "/a";
    const preduce::RunResult a = preduce::simulate(straight);
    preduce::TrainOptions cut = straight;
    cut.checkpoint_dir = dir + "/b";
    preduce::simulate(cut);
    // As if it had stopped after its checkpoint at 50.
    std::filesystem::remove_all(step_dir(cut.checkpoint_dir, 100));
    std::filesystem::remove_all(step_dir(cut.checkpoint_dir, 75));
    preduce::TrainOptions resumed = cut;
    resumed.resume = true;
    const preduce::RunResult b = preduce::simulate(resumed);
    CHECK(b.average_model == a.average_model);
    CHECK(b.summary == a.summary);  // virtual times, curve, accuracies, group counts
    CHECK(b.curve.mean_accuracy == a.curve.mean_accuracy);
    CHECK(a.summary["final_accuracy_mean"].get<double>() > 0.8);
    // Every tensor of the final checkpoint, byte for byte: models, steps, versions, clocks,
    // controller history.
    const TensorFile x = load_safetensors(step_dir(straight.checkpoint_dir, 100) + "/rank_00000.safetensors");
    const TensorFile y = load_safetensors(step_dir(cut.checkpoint_dir, 100) + "/rank_00000.safetensors");
    REQUIRE(x.tensors.size() == y.tensors.size());
    for (std::size_t i = 0; i < x.tensors.size(); ++i) {
      INFO(x.tensors[i].first);
      REQUIRE(x.tensors[i].first == y.tensors[i].first);
      REQUIRE(x.tensors[i].second.nbytes() == y.tensors[i].second.nbytes());
      CHECK(std::memcmp(x.tensors[i].second.raw(), y.tensors[i].second.raw(), x.tensors[i].second.nbytes()) == 0);
    }
    // The step and the version really moved on from the checkpoint at 50.
    CHECK(x.get("w0.counters").data<std::int64_t>()[0] == 100);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("a simulated run refuses a checkpoint of another worker count or mode", "[preduce][resume]") {
  const std::string dir = scratch("mismatch");
  preduce::TrainOptions o = small("preduce");
  o.steps = 10;
  o.checkpoint_dir = dir;
  preduce::simulate(o);
  preduce::TrainOptions more = o;
  more.resume = true;
  more.sim_workers = 6;
  CHECK_THAT(test::error_of([&] { preduce::simulate(more); }),
             Catch::Contains("written with workers = 5, this run has 6; refusing to resume"));
  preduce::TrainOptions real = o;
  real.resume = true;
  real.mode = "eager";
  CHECK_THAT(test::error_of([&] { preduce::simulate(real); }), Catch::Contains("sync.mode = \"preduce\""));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a resume from a shard whose tensor has another dtype names the tensor, the file and both dtypes",
          "[preduce][resume]") {
  const std::string dir = scratch("dtype");
  preduce::TrainOptions o = small("allreduce");
  o.steps = 10;
  o.checkpoint_interval = 10;
  o.checkpoint_dir = dir;
  preduce::simulate(o);
  // The shard rewritten with worker 0's parameters as I32 (same bytes, same size), as an older
  // or doctored file would hold them.
  const std::string shard = step_dir(dir, 10) + "/rank_00000.safetensors";
  TensorFile file = load_safetensors(shard);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : file.tensors) {
    if (name != "w0.params") {
      tensors.emplace_back(name, t);
      continue;
    }
    Tensor as_int = Tensor::empty(t.shape(), DType::I32);
    std::memcpy(as_int.raw(), t.raw(), t.nbytes());
    tensors.emplace_back(name, as_int);
  }
  save_safetensors(shard, tensors, file.metadata);
  preduce::TrainOptions resumed = o;
  resumed.resume = true;
  resumed.steps = 20;
  CHECK_THAT(test::error_of([&] { preduce::simulate(resumed); }),
             Catch::Contains("tensor 'w0.params' of " + shard + " holds I32 values") &&
                 Catch::Contains("but this run reads it as F32"));
  std::filesystem::remove_all(dir);
}
