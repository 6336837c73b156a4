// Nothing lost unseen (issue 17), end to end: each training app with its metrics (or curve, or
// stdout) on a full disk (/dev/full: ENOSPC on every write) or in a directory it cannot write
// exits non-zero with a message naming the file; a re-run that fails before its first record
// leaves the previous run's metrics as they were; preduce_train under mpirun -np 2 refuses one
// metrics file for two ranks and writes one whole file per rank with '%r'.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/fileio.hpp"

namespace {
namespace fs = std::filesystem;

const std::string kSource = SKEW_SOURCE_DIR;
const std::string kMpiexec = std::string(SKEW_MPIEXEC) + " --oversubscribe -np 2 ";
// Short runs of each app: a few seconds at most.
const std::string kMoe = std::string(SKEW_MOE_TRAIN) + " --config " + kSource + "/configs/moe.ini --train.iterations=3";
const std::string kPreduce = std::string(SKEW_PREDUCE_TRAIN) + " --config " + kSource +
                             "/configs/preduce.ini --train.steps=40 --train.log_interval=0";
const std::string kWide = std::string(SKEW_WIDE_TRAIN) + " --config " + kSource +
                          "/configs/wide.ini --data.train='synthetic:criteo?rows=3000&features=20000&alpha=1.1&seed=2'"
                          " --data.valid='synthetic:criteo?rows=1000&features=20000&alpha=1.1&seed=2&first_row=500000'"
                          " --train.epochs=2";

struct Outcome {
  int code = -1;     // exit status
  std::string text;  // stdout and stderr
};

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("skew_output_apps_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `command` with stdout and stderr to `dir`/log (or stdout to `stdout_to` and stderr alone
// to the log).
Outcome run(const std::string& command, const fs::path& dir, const std::string& stdout_to = "") {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  const std::string log = (dir / "log").string();
  const std::string redirect = stdout_to.empty() ? " > " + log + " 2>&1" : " > " + stdout_to + " 2> " + log;
  const int status = std::system((command + redirect).c_str());
  Outcome o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  o.text = skew::read_file(log);
  return o;
}

// A directory no process can create files in, root included (sysfs); empty when absent.
std::string unwritable_dir() {
  return fs::is_directory("/sys/kernel") ? "/sys/kernel" : "";
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

int broken_lines(const std::string& path, int* lines) {
  std::istringstream in(skew::read_file(path));
  int broken = 0;
  *lines = 0;
  for (std::string line; std::getline(in, line); ++*lines) broken += nlohmann::json::accept(line) ? 0 : 1;
  return broken;
}
}  // namespace

TEST_CASE("moe_train: metrics on a full disk or in an unwritable directory exit non-zero naming the file") {
  const fs::path dir = scratch("moe");
  const Outcome full = run(kMoe + " --output.metrics=/dev/full", dir);
  INFO(full.text);
  CHECK(full.code != 0);
  CHECK(mentions(full.text, "'/dev/full'"));
  CHECK(mentions(full.text, "No space left on device"));

  skew::write_file_atomic((dir / "file").string(), "a file, not a directory");
  const std::string under_file = (dir / "file/metrics.jsonl").string();
  const Outcome notdir = run(kMoe + " --output.metrics=" + under_file, dir);
  INFO(notdir.text);
  CHECK(notdir.code != 0);
  CHECK(mentions(notdir.text, under_file));
  if (!unwritable_dir().empty()) {
    const Outcome denied = run(kMoe + " --output.metrics=" + unwritable_dir() + "/metrics.jsonl", dir);
    INFO(denied.text);
    CHECK(denied.code != 0);
    CHECK(mentions(denied.text, unwritable_dir() + "/metrics.jsonl"));
  }
  fs::create_directories(dir / "trace");
  fs::create_symlink("/dev/full", dir / "trace/t.rank0");
  const Outcome trace = run(kMoe + " --moe.save_trace=" + (dir / "trace/t").string(), dir);
  INFO(trace.text);
  CHECK(trace.code != 0);
  CHECK(mentions(trace.text, (dir / "trace/t.rank0").string()));
  fs::remove_all(dir);
}

TEST_CASE("moe_train: the run summary to a full stdout exits non-zero") {
  const fs::path dir = scratch("moe_stdout");
  const Outcome o = run(kMoe, dir, "/dev/full");
  INFO(o.text);
  CHECK(o.code != 0);
  CHECK(mentions(o.text, "stdout"));
  fs::remove_all(dir);
}

TEST_CASE("moe_train: a re-run that fails leaves the previous run's metrics file as it was") {
  const fs::path dir = scratch("moe_rerun");
  const std::string metrics = (dir / "metrics.jsonl").string();
  REQUIRE(run(kMoe + " --output.metrics=" + metrics, dir).code == 0);
  const std::string first = skew::read_file(metrics);
  REQUIRE(!first.empty());
  const Outcome bad = run(kMoe + " --output.metrics=" + metrics + " --moe.policy=tutel", dir);  // config validation
  CHECK(bad.code != 0);
  CHECK(skew::read_file(metrics) == first);
  // Fails after the metrics file is open, before the first record: the replayed trace is its
  // header (this run's settings) and no iteration.
  REQUIRE(run(kMoe + " --moe.save_trace=" + (dir / "recorded").string(), dir).code == 0);
  const std::string recorded = skew::read_file((dir / "recorded.rank0").string());
  skew::write_file_atomic((dir / "empty.rank0").string(), recorded.substr(0, recorded.find('\n') + 1));
  const Outcome late =
      run(kMoe + " --output.metrics=" + metrics + " --moe.replay_trace=" + (dir / "empty").string(), dir);
  INFO(late.text);
  CHECK(late.code != 0);
  CHECK(mentions(late.text, "ends before iteration 0"));
  CHECK(skew::read_file(metrics) == first);
  fs::remove_all(dir);
}

TEST_CASE(
    "preduce_train: metrics or curve on a full disk or in an unwritable directory exit non-zero naming the file") {
  const fs::path dir = scratch("preduce");
  for (const char* key : {"output.metrics", "output.curve"}) {
    for (const char* mode : {"allreduce", "simulate"}) {
      if (std::string(key) == "output.metrics" && std::string(mode) == "simulate") continue;  // not written there
      const std::string app = kPreduce + (std::string(mode) == "simulate" ? " --simulate" : " --sync.mode=allreduce");
      const Outcome full = run(app + " --" + key + "=/dev/full", dir);
      INFO(key << " " << mode << ": " << full.text);
      CHECK(full.code != 0);
      CHECK(mentions(full.text, "'/dev/full'"));
      CHECK(mentions(full.text, "No space left on device"));
      skew::write_file_atomic((dir / "file").string(), "a file, not a directory");
      const std::string under_file = (dir / "file/out").string();
      const Outcome notdir = run(app + " --" + key + "=" + under_file, dir);
      INFO(notdir.text);
      CHECK(notdir.code != 0);
      CHECK(mentions(notdir.text, under_file));
    }
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "preduce_train -np 2: one metrics file for two ranks is refused naming the key, and '%r' gives one whole file "
    "each") {
  const fs::path dir = scratch("preduce_np2");
  const std::string shared = (dir / "metrics.jsonl").string();
  const Outcome refused = run(kMpiexec + kPreduce + " --output.metrics=" + shared, dir);
  INFO(refused.text);
  CHECK(refused.code != 0);
  CHECK(mentions(refused.text, "output.metrics"));
  CHECK(mentions(refused.text, "%r"));
  CHECK_FALSE(fs::exists(shared));

  const Outcome per_rank = run(kMpiexec + kPreduce + " --output.metrics=" + (dir / "metrics.%r.jsonl").string(), dir);
  INFO(per_rank.text);
  REQUIRE(per_rank.code == 0);
  for (int rank : {0, 1}) {
    int lines = 0;
    CHECK(broken_lines((dir / ("metrics." + std::to_string(rank) + ".jsonl")).string(), &lines) == 0);
    CHECK(lines == 40);
  }
  fs::remove_all(dir);
}

TEST_CASE("wide_train: metrics on a full disk or in an unwritable directory exit non-zero naming the file") {
  const fs::path dir = scratch("wide");
  fs::create_directories(dir / "out");
  fs::create_symlink("/dev/full", dir / "out/metrics.jsonl");  // output.dir names the directory only
  const Outcome full = run(kWide + " --output.dir=" + (dir / "out").string(), dir);
  INFO(full.text);
  CHECK(full.code != 0);
  CHECK(mentions(full.text, (dir / "out/metrics.jsonl").string()));
  CHECK(mentions(full.text, "No space left on device"));
  if (!unwritable_dir().empty()) {
    const Outcome denied = run(kWide + " --output.dir=" + unwritable_dir() + "/skew_out", dir);
    INFO(denied.text);
    CHECK(denied.code != 0);
    CHECK(mentions(denied.text, unwritable_dir() + "/skew_out"));
  }
  fs::remove_all(dir);
}

TEST_CASE("wide_train: a re-run that fails after opening its metrics keeps the previous run's file") {
  const fs::path dir = scratch("wide_rerun");
  const std::string out = (dir / "out").string();
  REQUIRE(run(kWide + " --output.dir=" + out, dir).code == 0);
  const std::string first = skew::read_file(out + "/metrics.jsonl");
  REQUIRE(!first.empty());
  // A run that fails once its data is loaded, after it took the run directory (train.batch_size
  // = 0 did until it became the model's default, issue 36).
  const Outcome bad = run(kWide + " --output.dir=" + out + " --model.features=5", dir);
  INFO(bad.text);
  CHECK(bad.code != 0);
  CHECK(mentions(bad.text, "model.features = 5"));
  CHECK(skew::read_file(out + "/metrics.jsonl") == first);
  fs::remove_all(dir);
}
