// wide_train end to end: a tiny run under mpirun -np 2 learns the synthetic signal (validation
// AUC clearly above 0.5), saves a model, and --predict reproduces the in-process predictions;
// bad keys and a diverging model stop the run with an error naming the key or the step.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/fileio.hpp"
#include "core/safetensors.hpp"
#include "core/tensor.hpp"
#include "lib/wide/trainer.hpp"
#include "tests/apps/wide_app_test.hpp"

using namespace skew::wide;

using skew::test::run;

namespace {
const std::string kTrain = "synthetic:criteo?rows=6000&features=20000&alpha=1.1&seed=2";
const std::string kValid = "synthetic:criteo?rows=2000&features=20000&alpha=1.1&seed=2&first_row=500000";
}  // namespace

TEST_CASE("wide_train learns, saves, and --predict round-trips") {
  for (const char* schema : {"classical", "flow"}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     (std::string("skew_wide_app_") + std::to_string(getpid()) + "_" + schema);
    std::filesystem::remove_all(dir);
    const std::string cmd = std::string(SKEW_MPIEXEC) + " --oversubscribe -np 2 " + SKEW_WIDE_TRAIN + " --config " +
                            SKEW_SOURCE_DIR + "/configs/wide.ini --data.train='" + kTrain + "' --data.valid='" +
                            kValid + "' --train.epochs=3 --train.schema=" + schema + " --output.dir=" + dir.string() +
                            " > " + (dir.string() + ".log") + " 2>&1";
    REQUIRE(run(cmd) == 0);
    const auto summary = nlohmann::json::parse(skew::read_file((dir / "summary.json").string()));
    INFO(schema << " summary: " << summary.dump());
    CHECK(summary["valid_auc"].get<double>() > 0.7);
    CHECK(summary["ranks"].get<int>() == 2);
    CHECK(std::filesystem::exists(dir / "metrics.jsonl"));
    // Set-up's parts come one after another before the first step, which fit() (summary
    // "seconds") reaches after the process's start.
    double parts = 0;
    for (const char* part :
         {"setup_startup_seconds", "setup_data_seconds", "setup_model_seconds", "setup_trainer_seconds"}) {
      INFO(part);
      CHECK(summary[part].get<double>() >= 0);
      parts += summary[part].get<double>();
    }
    const double setup = summary["setup_seconds"].get<double>();
    CHECK(setup >= parts - 1e-6);
    CHECK(setup <= summary["setup_startup_seconds"].get<double>() + summary["seconds"].get<double>());
    CHECK(summary["valid_seconds"].get<double>() > 0);  // 3 epochs validated
    CHECK(summary["save_seconds"].get<double>() > 0);   // rank 0 saved the best model
    // A row's traffic by hand: 39 entries, each reading and writing its FM row (1 + k = 9 floats)
    // in the parameters, AdaGrad's n and the batch gradient (2 ranks: no Hogwild), plus each
    // entry's id and value and the row's offset, label and logit.
    CHECK(summary["bytes_per_row"].get<double>() == Approx(39 * 9 * 4 * 2 * 3 + 39 * 8 + 16));

    const std::string out = (dir / "pred.txt").string(), predict_log = (dir / "predict.log").string();
    REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --predict --predict.model=" + (dir / "model.safetensors").string() +
                " --predict.data='" + kValid + "' --predict.output=" + out + " > " + predict_log + " 2>&1") == 0);
    TrainOptions o;
    o.schema = TrainSchema::Classical;  // as --predict scores
    WideModel model = WideModel::load((dir / "model.safetensors").string());
    SparseDataset valid = load_dataset(kValid, ReadOptions{});
    CHECK(model.normalized);  // FM: train.normalize = auto means on
    normalize_instances(valid);
    WideTrainer in_process(std::move(model), o);
    const std::vector<float> expect = in_process.predict(valid);
    std::ifstream in(out);
    std::vector<float> got;
    for (float p; in >> p;) got.push_back(p);
    REQUIRE(got.size() == expect.size());
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expect[i]).margin(2e-6));
    // It says what it scored: the rows, and AUC and logloss against the data's labels, as the
    // in-process evaluation of the same model gives them (to the 4 decimals printed).
    const Evaluation e = in_process.evaluate(valid);
    std::ostringstream said;
    said << "predict: " << e.samples << " rows of " << kValid << " scored with " << (dir / "model.safetensors").string()
         << ": AUC " << std::fixed << std::setprecision(4) << e.auc << ", logloss " << e.logloss << " -> " << out;
    CHECK(e.samples == static_cast<std::int64_t>(got.size()));
    CHECK(skew::read_file(predict_log).find(said.str()) != std::string::npos);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("wide_train --train.device=cuda without a GPU exits with an error naming the key") {
  if (skew::cuda_device_count() > 0) return;  // on a GPU machine the CUDA tests run the path
  const auto log = std::filesystem::temp_directory_path() / ("skew_wide_app_cuda_" + std::to_string(getpid()) + ".log");
  const int rc = run(std::string(SKEW_WIDE_TRAIN) + " --data.train='" + kTrain +
                     "' --data.valid= --train.device=cuda > " + log.string() + " 2>&1");
  CHECK(rc != 0);
  const std::string text = skew::read_file(log.string());
  INFO(text);
  CHECK(text.find("train.device = cuda") != std::string::npos);
  // Said before any data is read: a data.train that does not exist is not what it reports.
  const int rc_missing = run(std::string(SKEW_WIDE_TRAIN) + " --data.train=" + log.string() +
                             ".missing.libsvm --data.valid= --train.device=cuda > " + log.string() + " 2>&1");
  CHECK(rc_missing != 0);
  const std::string missing = skew::read_file(log.string());
  INFO(missing);
  CHECK(missing.find("train.device = cuda, but") != std::string::npos);
  CHECK(missing.find(".missing.libsvm") == std::string::npos);
  std::filesystem::remove(log);
}

TEST_CASE("wide_train killed mid-run with checkpoints on leaves its best model so far, whole and usable") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_app_kill_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto model = dir / "model.safetensors", pid_file = dir / "pid";
  // Far more epochs than the test waits for, and no early stop: the run is killed, never done.
  // With checkpoints the model is written at every improving epoch (without, once at the end).
  REQUIRE(run("sh -c '" + std::string(SKEW_WIDE_TRAIN) + " --config " + SKEW_SOURCE_DIR +
              "/configs/wide.ini --data.train=\"" + kTrain + "\" --data.valid=\"" + kValid +
              "\" --train.epochs=100000 --train.patience=0 --output.dir=" + dir.string() +
              " --output.checkpoint_dir=" + (dir / "checkpoints").string() + " > " + dir.string() +
              ".log 2>&1 & echo $! > " + pid_file.string() + "'") == 0);
  for (int waited_ms = 0; !std::filesystem::exists(model) && waited_ms < 120000; waited_ms += 20) usleep(20000);
  const std::string pid = skew::read_file(pid_file.string());
  run("kill -9 " + pid);
  REQUIRE(std::filesystem::exists(model));
  CHECK_FALSE(std::filesystem::exists(dir / "summary.json"));
  const skew::TensorFile file = skew::load_safetensors(model.string());
  CHECK(std::stoi(file.metadata.at("epoch")) >= 1);
  TrainOptions o;
  WideTrainer kept(WideModel::load(model.string()), o);
  SparseDataset valid = load_dataset(kValid, ReadOptions{});
  if (kept.model().normalized) normalize_instances(valid);
  CHECK(kept.evaluate(valid).auc > 0.7);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir.string() + ".log");
}

TEST_CASE("wide_train rejects out-of-range keys at start-up, naming them") {
  // train.epochs = 2^32 + 1 once ran one epoch through an int cast; threads = 0 was accepted.
  // (train.batch_size and train.tile_samples 0 are the model's defaults since issue 36.)
  for (const char* bad :
       {"train.hot_features=-1", "train.tile_samples=-1", "train.replica_budget_mb=-2", "train.epochs=4294967297",
        "train.threads=0", "model.k=0", "train.log_every=0", "train.lr=-1", "train.batch_size=-1", "model.features=-1",
        "train.patience=-1", "train.adagrad_init=-1", "train.adagrad_init=2e6"}) {
    const auto log =
        std::filesystem::temp_directory_path() / ("skew_wide_app_bad_" + std::to_string(getpid()) + ".log");
    const int rc = run(std::string(SKEW_WIDE_TRAIN) + " --data.train='" + kTrain + "' --data.valid= --" + bad + " > " +
                       log.string() + " 2>&1");
    const std::string text = skew::read_file(log.string()), setting(bad);
    const std::string key = setting.substr(0, setting.find('=')), value = setting.substr(setting.find('=') + 1);
    INFO(text);
    CHECK(rc != 0);
    CHECK(text.find("bad value '" + value + "' for key '" + key + "'") != std::string::npos);
    std::filesystem::remove(log);
  }
}

TEST_CASE("wide_train whose model diverges stops with an error naming the epoch and step, on 1 and 2 ranks") {
  // train.lr = 1e30: the first update sends the weights to inf, the next loss is NaN. The run
  // once went on to spin forever in roc_auc; now every rank stops at that step.
  for (int ranks : {1, 2}) {
    for (const char* model : {"lr", "ffm"}) {
      const auto log = std::filesystem::temp_directory_path() /
                       ("skew_wide_app_diverge_" + std::to_string(getpid()) + "_" + model + ".log");
      const int rc = run("timeout 120 " + std::string(SKEW_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                         " " + SKEW_WIDE_TRAIN + " --data.train='" + kTrain + "' --data.valid='" + kValid +
                         "' --train.lr=1e30 --train.optimizer=sgd --train.epochs=2 --model.type=" + model + " > " +
                         log.string() + " 2>&1");
      const std::string text = skew::read_file(log.string());
      INFO(ranks << " ranks, " << model << ": " << text);
      CHECK(rc != 0);
      CHECK(WEXITSTATUS(rc) != 124);  // stopped by the check, not by the timeout
      CHECK(text.find("epoch 1 step ") != std::string::npos);
      CHECK(text.find("the model diverged") != std::string::npos);
      std::filesystem::remove(log);
    }
  }
}

TEST_CASE("wide_train with an empty data.train, or too few rows for the ranks, names the key or the file") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_app_rows_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "log").string(), one_row = (dir / "one.libsvm").string();
  std::ofstream(one_row) << "1 1:1 2:1\n";
  int rc = run(std::string(SKEW_WIDE_TRAIN) + " --data.train= --data.valid= > " + log + " 2>&1");
  std::string text = skew::read_file(log);
  INFO(text);
  CHECK(rc != 0);
  CHECK(text.find("data.train is empty") != std::string::npos);
  rc = run("timeout 120 " + std::string(SKEW_MPIEXEC) + " --oversubscribe -np 2 " + SKEW_WIDE_TRAIN +
           " --data.train=" + one_row + " --data.valid= --train.batch_size=2 > " + log + " 2>&1");
  text = skew::read_file(log);
  INFO(text);
  CHECK(rc != 0);
  CHECK(WEXITSTATUS(rc) != 124);
  CHECK(text.find("data.train " + one_row + " leaves a rank without rows (1 rows for 2 ranks)") != std::string::npos);
  std::filesystem::remove_all(dir);
}
