// The run directory every trainer writes by default (issue 34, item 2) and the start-up check of
// every output path (issue 38), end to end: each app run with no output key, in an empty working
// directory, leaves out/<app>/<time>-<pid>/ with the configuration, metrics, summary and model or
// checkpoint, and prints its path at the start and the end; a second run gets a new directory;
// config.ini trains the same run again; wide_train --predict scores with the saved model what the
// training run reported; moe_train resumes from the saved checkpoint bit-exactly (and refuses to
// resume into a new run directory); an explicit key wins; output.dir empty writes nothing; an
// unwritable path fails, naming its key, before the first metrics line; placement_sim refuses an
// unwritable table before it simulates.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/fileio.hpp"
#include "tests/apps/wide_app_test.hpp"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = SKEW_SOURCE_DIR;
const std::string kMoe = std::string(SKEW_MOE_TRAIN) + " --config " + kSource + "/configs/moe.ini";
const std::string kPreduce = std::string(SKEW_MPIEXEC) + " -np 2 " + SKEW_PREDUCE_TRAIN + " --config " + kSource +
                             "/configs/preduce.ini --train.steps=40 --sync.mode=allreduce";
const std::string kValid = "synthetic:criteo?rows=1000&features=20000&alpha=1.1&seed=2&first_row=500000";
const std::string kWide = std::string(SKEW_WIDE_TRAIN) + " --config " + kSource +
                          "/configs/wide.ini --data.train='synthetic:criteo?rows=3000&features=20000&alpha=1.1&seed=2'"
                          " --data.valid='" +
                          kValid + "' --train.epochs=2";

struct Outcome {
  int code = -1;
  std::string text;            // stdout and stderr
  std::vector<fs::path> dirs;  // the run directories the text names, in order, under `cwd`
};

// An empty working directory of its own for each test.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("skew_run_dir_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Outcome run_in(const fs::path& cwd, const std::string& command) {
  const std::string log = (cwd / "log").string();
  const int status = skew::test::run("cd " + cwd.string() + " && " + command + " > " + log + " 2>&1");
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  o.text = skew::read_file(log);
  const std::regex named(R"(run directory (\S+))");
  for (auto it = std::sregex_iterator(o.text.begin(), o.text.end(), named); it != std::sregex_iterator(); ++it)
    o.dirs.push_back(cwd / (*it)[1].str());
  return o;
}

// The one run directory a successful run names at its start and its end.
fs::path the_run_dir(const Outcome& o) {
  INFO(o.text);
  REQUIRE(o.code == 0);
  REQUIRE(o.dirs.size() == 2);
  CHECK(o.dirs[0] == o.dirs[1]);
  return o.dirs[0];
}

std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) names.insert(fs::relative(entry.path(), dir).string());
  return names;
}

json summary_line(const Outcome& o) {
  const std::size_t last = o.text.rfind("\n{\"app\"");
  REQUIRE(last != std::string::npos);
  return json::parse(o.text.substr(last + 1, o.text.find('\n', last + 1) - last - 1));
}

std::vector<json> records(const fs::path& file) {
  std::vector<json> out;
  std::istringstream in(skew::read_file(file.string()));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

// What the run directory's summary.json says is what the run printed.
void check_summary_saved(const fs::path& dir, const Outcome& o) {
  CHECK(json::parse(skew::read_file((dir / "summary.json").string())) == summary_line(o));
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("moe_train's default run directory: config, metrics, summary and a checkpoint that resumes bit-exactly") {
  const fs::path cwd = scratch("moe");
  const Outcome first = run_in(cwd, kMoe + " --train.iterations=4");
  const fs::path dir = the_run_dir(first);
  CHECK(dir.parent_path() == cwd / "out/moe_train");
  CHECK(files_under(dir) == std::set<std::string>{"config.ini", "metrics.jsonl", "summary.json",
                                                  "checkpoints/step_00000004/COMPLETE",
                                                  "checkpoints/step_00000004/index.json",
                                                  "checkpoints/step_00000004/rank_00000.safetensors"});
  CHECK(records(dir / "metrics.jsonl").size() == 4);
  check_summary_saved(dir, first);

  // The same command again: a new directory beside it, the first one untouched.
  const std::string first_metrics = skew::read_file((dir / "metrics.jsonl").string());
  const Outcome again = run_in(cwd, kMoe + " --train.iterations=4");
  CHECK(the_run_dir(again) != dir);
  CHECK(skew::read_file((dir / "metrics.jsonl").string()) == first_metrics);

  // config.ini alone trains the same run (deterministic on one rank: the same losses).
  const Outcome replay = run_in(cwd, std::string(SKEW_MOE_TRAIN) + " --config " + (dir / "config.ini").string());
  const fs::path replay_dir = the_run_dir(replay);
  CHECK(replay_dir != dir);
  CHECK(summary_line(replay)["final_loss"] == summary_line(first)["final_loss"]);

  // Resuming the first run to 8 iterations ends where a straight 8-iteration run ends.
  const Outcome straight = run_in(cwd, kMoe + " --train.iterations=8");
  const Outcome resumed = run_in(cwd, kMoe + " --train.iterations=8 --output.resume=true --output.dir=" + dir.string());
  INFO(resumed.text);
  REQUIRE(resumed.code == 0);
  CHECK(mentions(resumed.text, "resum"));
  CHECK(summary_line(resumed)["final_loss"] == summary_line(straight)["final_loss"]);
  CHECK(records(dir / "metrics.jsonl").size() == 8);
  CHECK(fs::exists(dir / "checkpoints/step_00000008/COMPLETE"));

  // Resuming into a new run directory (output.dir = auto) has nothing to continue: refused.
  const std::size_t runs = std::distance(fs::directory_iterator(cwd / "out/moe_train"), fs::directory_iterator());
  const Outcome nowhere = run_in(cwd, kMoe + " --output.resume=true");
  INFO(nowhere.text);
  CHECK(nowhere.code != 0);
  CHECK(mentions(nowhere.text, "output.dir naming the run to continue"));
  CHECK(std::distance(fs::directory_iterator(cwd / "out/moe_train"), fs::directory_iterator()) == long(runs));
  fs::remove_all(cwd);
}

TEST_CASE("preduce_train's default run directory on 2 ranks: per-rank metrics, curve, summary and checkpoint") {
  const fs::path cwd = scratch("preduce");
  const Outcome o = run_in(cwd, kPreduce);
  const fs::path dir = the_run_dir(o);
  CHECK(dir.parent_path() == cwd / "out/preduce_train");
  CHECK(files_under(dir) ==
        std::set<std::string>{"config.ini", "curve.csv", "metrics.rank0.jsonl", "metrics.rank1.jsonl", "summary.json",
                              "checkpoints/step_00000040/COMPLETE", "checkpoints/step_00000040/index.json",
                              "checkpoints/step_00000040/rank_00000.safetensors",
                              "checkpoints/step_00000040/rank_00001.safetensors"});
  for (const char* rank : {"metrics.rank0.jsonl", "metrics.rank1.jsonl"}) CHECK(records(dir / rank).size() == 40);
  check_summary_saved(dir, o);
  fs::remove_all(cwd);
}

TEST_CASE("wide_train's default run directory: a model that --predict scores as the training run did") {
  const fs::path cwd = scratch("wide");
  const Outcome o = run_in(cwd, kWide);
  const fs::path dir = the_run_dir(o);
  CHECK(dir.parent_path() == cwd / "out/wide_train");
  CHECK(files_under(dir) == std::set<std::string>{"config.ini", "metrics.jsonl", "model.safetensors", "summary.json"});
  check_summary_saved(dir, o);

  // The saved model is the best epoch's: scoring the validation rows gives its AUC and logloss.
  const json trained = summary_line(o);
  const Outcome predicted =
      run_in(cwd, std::string(SKEW_WIDE_TRAIN) + " --predict --predict.model=" + (dir / "model.safetensors").string() +
                      " --predict.data='" + kValid + "' --predict.output=" + (cwd / "scores.txt").string());
  INFO(predicted.text);
  REQUIRE(predicted.code == 0);
  CHECK(predicted.dirs.empty());  // --predict trains nothing: no run directory
  const std::smatch got = [&] {
    std::smatch m;
    std::regex_search(predicted.text, m, std::regex(R"((\d+) rows.*AUC ([0-9.]+).*logloss ([0-9.]+))"));
    return m;
  }();
  REQUIRE(got.size() == 4);
  CHECK(std::stoi(got[1]) == 1000);
  CHECK(std::stod(got[2]) == Approx(trained["valid_auc"].get<double>()).margin(5.1e-5));
  CHECK(std::stod(got[3]) == Approx(trained["valid_logloss"].get<double>()).margin(5.1e-5));
  fs::remove_all(cwd);
}

TEST_CASE("an explicit output key wins over the run directory, and output.dir empty writes none") {
  const fs::path cwd = scratch("explicit");
  const Outcome o = run_in(cwd, kMoe + " --train.iterations=2 --output.metrics=" + (cwd / "m.jsonl").string());
  const fs::path dir = the_run_dir(o);
  CHECK(records(cwd / "m.jsonl").size() == 2);
  CHECK_FALSE(fs::exists(dir / "metrics.jsonl"));
  CHECK(fs::exists(dir / "config.ini"));

  const fs::path none = scratch("none");
  const Outcome off = run_in(none, kMoe + " --train.iterations=2 --output.dir=");
  INFO(off.text);
  CHECK(off.code == 0);
  CHECK(off.dirs.empty());
  CHECK(files_under(none) == std::set<std::string>{"log"});
  fs::remove_all(cwd);
  fs::remove_all(none);
}

// sysfs: no process can create a file there, root included.
TEST_CASE("an unwritable output path fails before training, naming its key and path") {
  if (!fs::is_directory("/sys/kernel")) {
    WARN("no /sys/kernel to be refused by: not checked");
    return;
  }
  const fs::path cwd = scratch("unwritable");
  const std::string bad = "/sys/kernel/skew_out";
  struct Case {
    std::string command, key;
  };
  const std::vector<Case> cases = {
      {kMoe + " --train.iterations=200 --output.checkpoint_dir=" + bad, "output.checkpoint_dir"},
      {kMoe + " --train.iterations=200 --output.metrics=" + bad + "/m.jsonl", "output.metrics"},
      {kMoe + " --train.iterations=200 --moe.save_trace=" + bad + "/trace", "moe.save_trace"},
      {kWide + " --output.model=" + bad + "/model.safetensors", "output.model"},
      {kWide + " --output.checkpoint_dir=" + bad, "output.checkpoint_dir"},
      {kWide + " --output.dir=" + bad, "output.dir"},
      {kPreduce + " --output.curve=" + bad + "/curve.csv", "output.curve"},
      {kPreduce + " --output.checkpoint_dir=" + bad, "output.checkpoint_dir"},
  };
  for (const Case& c : cases) {
    const Outcome o = run_in(cwd, c.command);
    INFO(c.command << "\n" << o.text);
    CHECK(o.code != 0);
    CHECK(mentions(o.text, c.key + " = '" + bad));
    // No training step ran: no progress line, and the run directory holds no metrics line.
    CHECK_FALSE(std::regex_search(o.text, std::regex(R"(\biter \d|\bepoch \d|\bstep \d)")));
    for (const fs::path& dir : o.dirs)
      for (const std::string& file : files_under(dir)) CHECK(file == "config.ini");
  }
  fs::remove_all(cwd);
}

TEST_CASE("placement_sim: an unwritable table is refused before the simulation, naming its key") {
  if (!fs::is_directory("/sys/kernel")) {
    WARN("no /sys/kernel to be refused by: not checked");
    return;
  }
  const fs::path cwd = scratch("placement_sim");
  const std::string sim = std::string(SKEW_PLACEMENT_SIM) + " --config " + kSource + "/configs/sim.ini";
  for (const char* key : {"output.table", "output.steps_csv", "output.summary_csv", "output.changes"}) {
    const Outcome o = run_in(cwd, sim + " --" + key + "=/sys/kernel/skew_out/file");
    INFO(o.text);
    CHECK(o.code != 0);
    CHECK(mentions(o.text, std::string(key) + " = '/sys/kernel/skew_out/file'"));
    CHECK_FALSE(mentions(o.text, "| policy |"));  // the results table: the simulation did not run
  }
  fs::remove_all(cwd);
}
