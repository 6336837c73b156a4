// wide_train given only data.train (issue 36, item 5): it validates on a held-out split of that
// file, says so, and learns what the file teaches (the built-in synthetic set, which it used to
// validate on, shares nothing with the file: its AUC would be about 0.5); data.valid_fraction = 0
// turns validation off and a fraction out of range is refused naming the key.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/fileio.hpp"
#include "lib/wide/holdout.hpp"
#include "tests/apps/wide_app_test.hpp"

using skew::test::run;

namespace {
constexpr int kRows = 4000;

// A libsvm file whose label is row r's parity, carried by feature 1 (label 1) or 2 (label 0),
// beside a noise feature: validation on these rows reaches an AUC near 1.
std::filesystem::path write_parity_file(const std::filesystem::path& dir) {
  const auto file = dir / "parity.libsvm";
  std::ofstream out(file);
  for (int r = 0; r < kRows; ++r) out << r % 2 << " " << (r % 2 ? 1 : 2) << ":1 " << 10 + r % 37 << ":1\n";
  return file;
}

struct Run {
  int rc = 0;
  std::string log;
  std::filesystem::path dir;
};

Run train_on(const std::filesystem::path& file, const std::string& name, const std::string& extra) {
  Run r;
  r.dir = file.parent_path() / name;
  const auto log = file.parent_path() / (name + ".log");
  r.rc = run(std::string(SKEW_WIDE_TRAIN) + " --data.train=" + file.string() +
             " --data.cache=false --model.type=lr --train.epochs=3 --output.dir=" + r.dir.string() + " " + extra +
             " > " + log.string() + " 2>&1");
  r.log = skew::read_file(log.string());
  return r;
}
}  // namespace

TEST_CASE("wide_train with only data.train validates on a held-out split of it") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_valid_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file = write_parity_file(dir);

  const Run split = train_on(file, "split", "");
  INFO(split.log);
  REQUIRE(split.rc == 0);
  int held = 0;  // what data.valid_fraction's default (0.1) and model.seed's (1) hold out
  for (int r = 0; r < kRows; ++r) held += skew::wide::held_out(std::uint64_t(r), 0.1, 1);
  const std::string said = "validation: " + std::to_string(held) + " rows of data.train held out on rank 0";
  CHECK(split.log.find(said) != std::string::npos);
  CHECK(split.log.find(std::to_string(kRows - held) + " left to train on") != std::string::npos);
  const auto summary = nlohmann::json::parse(skew::read_file((split.dir / "summary.json").string()));
  CHECK(summary["valid_auc"].get<double>() > 0.99);
  CHECK(summary["features"].get<int>() == 47);  // the file's ids, not the synthetic set's 50000

  const Run off = train_on(file, "off", "--data.valid_fraction=0");
  INFO(off.log);
  REQUIRE(off.rc == 0);
  CHECK(off.log.find("validation: none (data.valid = auto with data.valid_fraction = 0)") != std::string::npos);
  const auto off_summary = nlohmann::json::parse(skew::read_file((off.dir / "summary.json").string()));
  CHECK(off_summary["valid_seconds"].get<double>() == 0);
  CHECK(off_summary["epochs_run"].get<int>() == 3);

  const Run bad = train_on(file, "bad", "--data.valid_fraction=0.6");
  INFO(bad.log);
  CHECK(bad.rc != 0);
  CHECK(bad.log.find("data.valid_fraction") != std::string::npos);
  std::filesystem::remove_all(dir);
}
