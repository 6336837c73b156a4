// wide_train resume (lib/wide/checkpoint.hpp) end to end: a run resumed mid-epoch from a
// checkpoint ends bit for bit where the straight run ends (weights, optimizer state, run state,
// metrics records, summary) for LR, FM and FFM, both CPU schemas, AdaGrad and FTRL, on 1 and 2
// ranks; a checkpoint of another model, optimizer, batch or world size is refused by name.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint.hpp"
#include "core/fileio.hpp"
#include "core/safetensors.hpp"
#include "tests/apps/wide_app_test.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using skew::test::run;

namespace {

// 3000 rows in batches of 256: 12 steps an epoch on 1 rank and on 2 (1500 rows, 128 a rank).
const std::string kData =
    " --data.train='synthetic:criteo?rows=3000&features=5000&alpha=1.1&seed=2'"
    " --data.valid='synthetic:criteo?rows=1000&features=5000&alpha=1.1&seed=2&first_row=500000'";
const std::string kRun = kData + " --train.batch_size=256 --train.epochs=3 --train.threads=1";
constexpr int kStepsPerEpoch = 12, kLastStep = 3 * kStepsPerEpoch;
constexpr int kResumeStep = 20;  // epoch 2, 8 steps in: mid-epoch and mid progress window (log_every 3)

std::string launcher(int ranks) {
  return ranks == 1
             ? std::string(SKEW_WIDE_TRAIN)
             : std::string(SKEW_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) + " " + SKEW_WIDE_TRAIN;
}

std::string step_dir(const fs::path& ckpt, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08d", step);
  return (ckpt / name).string();
}

std::vector<json> records(const fs::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// A record without its wall-clock fields.
json without_timing(json record) {
  record.erase("samples_per_s");
  record.erase("elapsed_s");
  record.erase("train_s");
  return record;
}

// Every tensor of two checkpoint shards, bit for bit, but the seconds the runs took.
void require_same_state(const std::string& a_path, const std::string& b_path) {
  const skew::TensorFile a = skew::load_safetensors(a_path), b = skew::load_safetensors(b_path);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    if (name == "run.epoch_seconds" || name == "run.train_seconds") continue;
    INFO(name);
    const skew::Tensor& u = b.get(name);
    REQUIRE(u.nbytes() == t.nbytes());
    CHECK(u.dtype() == t.dtype());
    CHECK(std::memcmp(t.raw(), u.raw(), t.nbytes()) == 0);
  }
}

std::vector<float> params_of(const std::string& path) {
  const skew::TensorFile f = skew::load_safetensors(path);
  const skew::Tensor& t = f.tensors.front().second;
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// For each model and schema: a straight run, a run checkpointed every 5 steps whose checkpoints
// after kResumeStep are then dropped, and a run resumed from kResumeStep; the last two end as
// the first did.
void check_resume_mid_epoch(int ranks) {
  for (const char* model : {"lr", "fm", "ffm"})
    for (const char* schema : {"classical", "flow"}) {
      const char* optimizer = std::string(schema) == "flow" ? "adagrad" : "ftrl";
      const fs::path base = fs::temp_directory_path() / ("skew_wide_resume_" + std::to_string(getpid()) + "_" + model +
                                                         "_" + schema + "_" + std::to_string(ranks));
      fs::remove_all(base);
      fs::create_directories(base / "resumed");
      const std::string common = launcher(ranks) + kRun + " --model.type=" + model + " --train.schema=" + schema +
                                 " --train.optimizer=" + optimizer + " --train.log_every=3";
      const std::string log = " >> " + (base / "log").string() + " 2>&1";
      INFO(ranks << " rank(s), " << model << ", " << schema << ", " << optimizer << "; log in " << base.string());
      // Straight: checkpoints at the epoch ends only, the last one the final state.
      REQUIRE(run(common + " --output.dir=" + (base / "straight").string() +
                  " --output.checkpoint_dir=" + (base / "straight/ckpt").string() + log) == 0);
      // Checkpointed every 5 steps; all after kResumeStep are then dropped, as if it died there.
      const fs::path ckpt = base / "ckpt";
      REQUIRE(run(common + " --output.dir=" + (base / "first").string() + " --output.checkpoint_dir=" + ckpt.string() +
                  " --output.checkpoint_interval=5 --output.keep=100" + log) == 0);
      REQUIRE(fs::exists(fs::path(step_dir(ckpt, kResumeStep)) / "COMPLETE"));
      for (const auto& e : fs::directory_iterator(ckpt))
        if (e.path().filename().string() > fs::path(step_dir(ckpt, kResumeStep)).filename().string())
          fs::remove_all(e.path());
      const std::vector<float> at_resume = params_of(step_dir(ckpt, kResumeStep) + "/rank_00000.safetensors");
      // Resumed in the killed run's output directory: its metrics file went on past the checkpoint.
      fs::copy_file(base / "first/metrics.jsonl", base / "resumed/metrics.jsonl");
      REQUIRE(run(common + " --output.dir=" + (base / "resumed").string() +
                  " --output.checkpoint_dir=" + ckpt.string() + " --output.resume=true" + log) == 0);

      for (int r = 0; r < ranks; ++r) {
        const std::string shard = skew::CheckpointDir::shard_name(r);
        require_same_state((fs::path(step_dir(base / "straight/ckpt", kLastStep)) / shard).string(),
                           (fs::path(step_dir(ckpt, kLastStep)) / shard).string());
      }
      const std::vector<float> final_params = params_of(step_dir(ckpt, kLastStep) + "/rank_00000.safetensors");
      CHECK(final_params != at_resume);  // the resumed run did train

      const json straight = json::parse(skew::read_file((base / "straight/summary.json").string()));
      const json resumed = json::parse(skew::read_file((base / "resumed/summary.json").string()));
      for (const char* key : {"epochs_run", "best_epoch", "valid_logloss", "valid_auc"})
        CHECK(resumed[key] == straight[key]);
      CHECK(resumed["resumed"] == true);

      // The killed run's records up to the checkpoint are kept, those after it dropped and
      // written again: the file is the straight run's, record for record.
      std::vector<json> expect;
      for (const json& rec : records(base / "straight/metrics.jsonl")) expect.push_back(without_timing(rec));
      const std::vector<json> got = records(base / "resumed/metrics.jsonl");
      REQUIRE(got.size() == expect.size());
      for (std::size_t i = 0; i < expect.size(); ++i) CHECK(without_timing(got[i]) == expect[i]);
      if (fs::exists(base / "resumed/model.safetensors"))  // the best epoch came after the resume
        CHECK(params_of((base / "resumed/model.safetensors").string()) ==
              params_of((base / "straight/model.safetensors").string()));
      fs::remove_all(base);
    }
}

}  // namespace

TEST_CASE("wide_train resumed mid-epoch ends bit for bit where the straight run ends, 1 rank") {
  check_resume_mid_epoch(1);
}

TEST_CASE("wide_train resumed mid-epoch ends bit for bit where the straight run ends, 2 ranks") {
  check_resume_mid_epoch(2);
}

TEST_CASE("wide_train resumed after its last epoch trains no more") {
  const fs::path base = fs::temp_directory_path() / ("skew_wide_resume_done_" + std::to_string(getpid()));
  fs::remove_all(base);
  const std::string cmd = launcher(1) + kRun + " --output.checkpoint_dir=" + (base / "ckpt").string() +
                          " --output.dir=" + base.string() + " >> " + base.string() + ".log 2>&1";
  REQUIRE(run(cmd) == 0);
  const json first = json::parse(skew::read_file((base / "summary.json").string()));
  const std::size_t lines = records(base / "metrics.jsonl").size();
  REQUIRE(run(cmd + " --output.resume=true") == 0);
  const json again = json::parse(skew::read_file((base / "summary.json").string()));
  CHECK(again["epochs_run"] == first["epochs_run"]);
  CHECK(again["valid_logloss"] == first["valid_logloss"]);
  CHECK(records(base / "metrics.jsonl").size() == lines);
  fs::remove_all(base);
  fs::remove(base.string() + ".log");
}

TEST_CASE("wide_train refuses a checkpoint written with another model, optimizer, batch or world size, naming it") {
  const fs::path base = fs::temp_directory_path() / ("skew_wide_resume_refuse_" + std::to_string(getpid()));
  fs::remove_all(base);
  const std::string ckpt = " --output.checkpoint_dir=" + (base / "ckpt").string();
  // The default batch of 1024: 3 steps an epoch.
  REQUIRE(run(launcher(1) + kData + " --train.epochs=1 --model.type=fm" + ckpt + " > /dev/null 2>&1") == 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {launcher(1) + " --model.type=ffm", "model.type = fm; this run has model.type = ffm"},
      {launcher(1) + " --model.type=fm --model.k=4", "model.k = 8; this run has model.k = 4"},
      {launcher(1) + " --model.type=fm --train.optimizer=ftrl",
       "train.optimizer = adagrad; this run has train.optimizer = ftrl"},
      {launcher(1) + " --model.type=fm --train.batch_size=128",
       "steps per epoch (data.train rows / train.batch_size) = 3; this run has"},
      {launcher(2) + " --model.type=fm", "world_size=1 but this job has world_size=2"},
      {launcher(1) + " --model.type=fm --train.device=cuda", "output.checkpoint_dir is set but train.device = cuda"},
  };
  for (const auto& [command, message] : cases) {
    const std::string log = (base / "log").string();
    const int rc = run(command + kData + " --train.epochs=1" + ckpt + " --output.resume=true > " + log + " 2>&1");
    const std::string text = skew::read_file(log);
    INFO(command << "\n" << text);
    CHECK(rc != 0);
    CHECK(text.find(message) != std::string::npos);
  }
  const std::string log = (base / "log").string();
  CHECK(run(launcher(1) + kData + " --output.resume=true > " + log + " 2>&1") != 0);
  CHECK(skew::read_file(log).find("output.resume = true needs output.checkpoint_dir") != std::string::npos);
  fs::remove_all(base);
}
