// wide_train's instance normalisation and early stopping, end to end: --predict scores a file
// as a float64 reference does on the instances scaled to unit norm (the scaling the model was
// trained with, recorded in it), and an early-stopped run keeps, saves and predicts with its best
// epoch's model, not its last.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/fileio.hpp"
#include "core/safetensors.hpp"
#include "lib/wide/model.hpp"
#include "tests/apps/wide_app_test.hpp"
#include "tests/unit/wide_reference.hpp"

using namespace skew::wide;
using skew::test::run;

namespace {
std::filesystem::path temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_norm_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Synthetic Criteo-like rows written as libffm text with values of different sizes per entry
// (the generator's are all 1, which every scaling leaves in proportion).
std::string write_libffm(const std::filesystem::path& path, const std::string& spec) {
  const SparseDataset d = load_dataset(spec, ReadOptions{});
  std::ostringstream os;
  for (std::int64_t r = 0; r < d.rows(); ++r) {
    os << d.label[std::size_t(r)];
    for (std::int64_t e = d.row_ptr[std::size_t(r)]; e < d.row_ptr[std::size_t(r) + 1]; ++e)
      os << ' ' << d.field[std::size_t(e)] << ':' << d.index[std::size_t(e)] << ':'
         << 0.25 * double(1 + (r * 7 + e) % 9);
    os << '\n';
  }
  skew::write_file_atomic(path.string(), os.str());
  return path.string();
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  return v;
}
}  // namespace

TEST_CASE("wide_train --predict scores instances normalised as in training, as a float64 reference does") {
  const auto dir = temp_dir("predict");
  const std::string train =
                        write_libffm(dir / "train.ffm", "synthetic:criteo?rows=3000&features=5000&alpha=1.1&seed=3"),
                    test = write_libffm(dir / "test.ffm",
                                        "synthetic:criteo?rows=300&features=5000&alpha=1.1&seed=3&first_row=90000");
  for (const char* model_type : {"fm", "ffm"}) {
    INFO(model_type);
    const std::string out = (dir / "out").string();
    REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --data.train=" + train +
                " --data.valid= --data.cache=false --model.type=" + model_type +
                " --model.k=4 --train.epochs=2 --train.schema=classical --output.dir=" + out + " > " + out +
                ".log 2>&1") == 0);
    const std::string model_path = out + "/model.safetensors", pred = (dir / "pred.txt").string();
    REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --predict --predict.model=" + model_path + " --predict.data=" + test +
                " --data.cache=false --predict.output=" + pred + " > /dev/null 2>&1") == 0);
    const WideModel model = WideModel::load(model_path);
    CHECK(model.normalized);  // train.normalize = auto: on for FM and FFM
    // The reference: the text parsed as is, each instance scaled in float64 to unit norm.
    ReadOptions ro;
    ro.use_cache = false;
    SparseDataset data = load_dataset(test, ro);
    std::vector<double> scaled(data.value.size());
    for (std::int64_t r = 0; r < data.rows(); ++r) {
      const auto begin = std::size_t(data.row_ptr[std::size_t(r)]), end = std::size_t(data.row_ptr[std::size_t(r) + 1]);
      double norm = 0;
      for (std::size_t e = begin; e < end; ++e) norm += double(data.value[e]) * data.value[e];
      for (std::size_t e = begin; e < end; ++e) scaled[e] = data.value[e] / std::sqrt(norm);
    }
    std::vector<double> raw_logits;
    const std::vector<double> p(model.params.begin(), model.params.end());
    for (std::int64_t r = 0; r < data.rows(); ++r) raw_logits.push_back(reference::ref_logit(model.shape, data, r, p));
    for (std::size_t e = 0; e < scaled.size(); ++e) data.value[e] = float(scaled[e]);
    const std::vector<double> got = read_numbers(pred);
    REQUIRE(got.size() == std::size_t(data.rows()));
    double worst = 0, unscaled_gap = 0;
    for (std::int64_t r = 0; r < data.rows(); ++r) {
      const double want = 1 / (1 + std::exp(-reference::ref_logit(model.shape, data, r, p)));
      worst = std::max(worst, std::fabs(got[std::size_t(r)] - want));
      unscaled_gap =
          std::max(unscaled_gap, std::fabs(got[std::size_t(r)] - 1 / (1 + std::exp(-raw_logits[std::size_t(r)]))));
    }
    CHECK(worst < 2e-6);         // predict.output prints 6 decimals
    CHECK(unscaled_gap > 1e-3);  // and the scaling matters on these values
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("wide_train stopped early keeps, saves and predicts with its best epoch's model") {
  const auto dir = temp_dir("early");
  const std::string kTrain = "synthetic:criteo?rows=3000&features=20000&alpha=1.1&seed=5",
                    kValid = "synthetic:criteo?rows=1000&features=20000&alpha=1.1&seed=5&first_row=700000";
  // A large step on few rows overfits after the first epochs: validation logloss turns up.
  const std::string out = (dir / "run").string();
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --data.train='" + kTrain + "' --data.valid='" + kValid +
              "' --model.type=fm --model.k=8 --train.lr=0.5 --train.l2=0 --train.epochs=20 --train.patience=2 "
              "--train.schema=classical --output.dir=" +
              out + " > " + out + ".log 2>&1") == 0);
  const auto summary = nlohmann::json::parse(skew::read_file(out + "/summary.json"));
  INFO(summary.dump());
  std::vector<double> valid_logloss;
  std::ifstream metrics(out + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    if (const auto rec = nlohmann::json::parse(line); rec.contains("valid_logloss"))
      valid_logloss.push_back(rec["valid_logloss"]);
  const int epochs_run = summary["epochs_run"], best_epoch = summary["best_epoch"];
  REQUIRE(int(valid_logloss.size()) == epochs_run);
  REQUIRE(epochs_run < 20);               // it stopped early
  REQUIRE(best_epoch == epochs_run - 2);  // patience 2: the best is two epochs before the end
  const auto best = std::min_element(valid_logloss.begin(), valid_logloss.end());
  CHECK(best - valid_logloss.begin() + 1 == best_epoch);
  const skew::TensorFile file = skew::load_safetensors(out + "/model.safetensors");
  CHECK(std::stoi(file.metadata.at("epoch")) == best_epoch);
  // No checkpoints: the best epoch was held in memory and written once, when the run stopped.
  CHECK(summary["model_writes"].get<int>() == 1);
  // --predict with the saved model reproduces the best epoch's validation logloss, not the last's.
  const std::string pred = (dir / "pred.txt").string();
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --predict --predict.model=" + out +
              "/model.safetensors --predict.data='" + kValid + "' --predict.output=" + pred + " > /dev/null 2>&1") ==
          0);
  const std::vector<double> p = read_numbers(pred);
  const SparseDataset valid = load_dataset(kValid, ReadOptions{});
  REQUIRE(p.size() == std::size_t(valid.rows()));
  double loss = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(p[i], 1e-6, 1 - 1e-6);  // printed probabilities, 6 decimals
    loss -= valid.label[i] > 0.5f ? std::log(q) : std::log(1 - q);
  }
  loss /= double(p.size());
  CHECK(loss == Approx(*best).epsilon(2e-3));
  CHECK(std::fabs(loss - valid_logloss.back()) > 5 * std::fabs(loss - *best));
  std::filesystem::remove_all(dir);
}
