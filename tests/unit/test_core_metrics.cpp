// Metrics: JSONL lines parse back, CSV cells are quoted as RFC 4180 wants, the summary is one
// JSON line. A full disk (/dev/full), an unwritable path and a full or closed stdout are
// errors naming the file; an earlier run's file stays until there is something to replace it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/metrics.hpp"
#include "tests/unit/error_message.hpp"

using skew::test::error_of;
using skew::test::quoted;

namespace {
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}
}  // namespace

TEST_CASE("metrics: JSONL writes one parsable object per line", "[metrics]") {
  const std::string path = "/tmp/skew_core_test_metrics/sub/run.jsonl";
  {
    skew::JsonlWriter w(path);
    REQUIRE(w.enabled());
    CHECK(w.path() == path);
    for (int step = 0; step < 3; ++step)
      w.write(skew::Json{{"step", step}, {"loss", 1.0 / (step + 1)}, {"note", "a\nb \"q\""}});
  }
  const auto lines = lines_of(skew::read_file(path));
  REQUIRE(lines.size() == 3);
  for (int step = 0; step < 3; ++step) {
    const auto j = skew::Json::parse(lines[static_cast<std::size_t>(step)]);
    CHECK(j["step"] == step);
    CHECK(j["loss"].get<double>() == Approx(1.0 / (step + 1)));
    CHECK(j["note"] == "a\nb \"q\"");
    CHECK(j.begin().key() == "step");  // insertion order is kept
  }
  skew::JsonlWriter disabled;
  CHECK_FALSE(disabled.enabled());
  disabled.write(skew::Json{{"x", 1}});
  CHECK_FALSE(skew::JsonlWriter("").enabled());
}

TEST_CASE("metrics: a resumed run keeps the records before its checkpoint, then appends", "[metrics]") {
  const std::string path = "/tmp/skew_core_test_metrics/resume.jsonl";
  // Steps 1-4 written, the last torn by a kill; the checkpoint was after step 2.
  skew::write_file_atomic(path, "{\"step\": 1, \"loss\": 0.5}\n\n{\"step\": 2}\n{\"step\": 3}\n{\"step\": 4, \"lo");
  skew::keep_jsonl_records_before(path, "step", 3);
  CHECK(skew::read_file(path) == "{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2}\n");
  skew::JsonlWriter(path, skew::OutputFile::Mode::Append).write(skew::Json{{"step", 3}});
  CHECK(lines_of(skew::read_file(path)) ==
        std::vector<std::string>{"{\"step\": 1, \"loss\": 0.5}", "{\"step\": 2}", "{\"step\":3}"});
  // Only a torn last line is dropped: damage elsewhere is named.
  skew::write_file_atomic(path, "{\"step\": 1}\n{\"step\": \"two\"}\n");
  CHECK_THAT(error_of([&] { skew::keep_jsonl_records_before(path, "step", 3); }),
             Catch::Contains(path + ":2 is not a metrics record with an integer \"step\""));
  skew::write_file_atomic(path, "{\"step\": 1}\n{\"ste\n{\"step\": 2}\n");
  CHECK_THAT(error_of([&] { skew::keep_jsonl_records_before(path, "step", 3); }), Catch::Contains(path + ":2"));
  skew::keep_jsonl_records_before("/tmp/skew_core_test_metrics/absent.jsonl", "step", 3);  // nothing to keep
  CHECK_FALSE(std::filesystem::exists("/tmp/skew_core_test_metrics/absent.jsonl"));
}

TEST_CASE("metrics: CSV quotes cells with separators, quotes and newlines", "[metrics]") {
  const std::string path = "/tmp/skew_core_test_metrics/table.csv";
  {
    skew::CsvWriter w(path, {"name", "value"});
    w.row({"plain", skew::csv_number(0.5)});
    w.row({"with,comma", skew::csv_number(1234567.0)});
    w.row({"say \"hi\"", skew::csv_number(1e-9)});
    w.row({"two\nlines", "x\ry"});
    CHECK_THROWS_WITH(w.row({"only one"}), Catch::Contains("has 1 cells, header has 2"));
  }
  CHECK(skew::read_file(path) ==
        "name,value\n"
        "plain,0.5\n"
        "\"with,comma\",1.23457e+06\n"
        "\"say \"\"hi\"\"\",1e-09\n"
        "\"two\nlines\",\"x\ry\"\n");
  CHECK_THROWS_WITH(skew::CsvWriter("/proc/no/such/dir/x.csv", {"a"}), Catch::Contains("/proc/no/such/dir"));
}

TEST_CASE("metrics: the run summary is a single JSON line", "[metrics]") {
  std::ostringstream captured;
  const skew::Json summary{{"app", "demo"}, {"steps", 3}, {"ok", true}};
  CHECK(summary.dump().find('\n') == std::string::npos);
  CHECK(skew::Json::parse(summary.dump()) == summary);
  skew::print_summary(summary);  // goes to stdout; the format is summary.dump()
}

namespace {
// Runs print_summary in a child whose stdout is `redirect` (opened on fd 1, or fd 1 closed when
// empty); returns 3 when it threw an Error naming stdout, 0 when it did not throw.
int summary_exit_code(const std::string& redirect) {
  std::fflush(stdout);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (redirect.empty()) {
      ::close(1);
    } else {
      const int fd = ::open(redirect.c_str(), O_WRONLY);
      if (fd < 0 || ::dup2(fd, 1) < 0) _exit(1);
    }
    try {
      skew::print_summary(skew::Json{{"app", "demo"}});
    } catch (const skew::Error& e) {
      _exit(std::string(e.what()).find("stdout") != std::string::npos ? 3 : 2);
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}
}  // namespace

TEST_CASE("metrics: a full disk (/dev/full) is an Error naming the file, for JSONL and CSV", "[metrics]") {
  skew::JsonlWriter jsonl("/dev/full");
  const std::string jsonl_error = error_of([&] { jsonl.write(skew::Json{{"step", 1}}); });
  CHECK_THAT(jsonl_error, Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
  skew::CsvWriter csv("/dev/full", {"a", "b"});
  const std::string csv_error = error_of([&] { csv.row({"1", "2"}); });
  CHECK_THAT(csv_error, Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
  skew::CsvWriter header_only("/dev/full", {"a"});
  CHECK_THAT(error_of([&] { header_only.close(); }), Catch::Contains("'/dev/full'"));
}

TEST_CASE("metrics: an unwritable path is an Error naming it when the writer is made", "[metrics]") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_core_test_metrics_bad_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  skew::write_file_atomic((dir / "file").string(), "a file, not a directory");
  const std::string path = (dir / "file/run.jsonl").string();
  CHECK_THAT(error_of([&] { skew::JsonlWriter w(path); }), Catch::Contains(quoted(path)));
  CHECK_THAT(error_of([&] { skew::CsvWriter w(path, {"a"}); }), Catch::Contains(quoted(path)));
  if (geteuid() == 0 && std::filesystem::is_directory("/sys/kernel"))  // root writes anywhere but sysfs
    CHECK_THAT(error_of([&] { skew::JsonlWriter w("/sys/kernel/run.jsonl"); }),
               Catch::Contains("'/sys/kernel/run.jsonl'") && Catch::Contains("Permission denied"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("metrics: an earlier run's file stays until the first record or row", "[metrics]") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_core_test_metrics_keep_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string jsonl = (dir / "m.jsonl").string(), csv = (dir / "c.csv").string();
  skew::write_file_atomic(jsonl, "{\"step\":0}\n");
  skew::write_file_atomic(csv, "a\n1\n");
  try {
    skew::JsonlWriter m(jsonl);
    skew::CsvWriter c(csv, {"a"});
    throw skew::Error("the run fails before its first record");
  } catch (const skew::Error&) {
  }
  CHECK(skew::read_file(jsonl) == "{\"step\":0}\n");
  CHECK(skew::read_file(csv) == "a\n1\n");
  {
    skew::JsonlWriter m(jsonl);
    skew::CsvWriter c(csv, {"b"});
    CHECK(skew::read_file(jsonl) == "{\"step\":0}\n");
    m.write(skew::Json{{"step", 7}});
    CHECK(skew::read_file(jsonl) == "{\"step\":7}\n");
  }
  CHECK(skew::read_file(csv) == "b\n");  // ended without rows: the header alone
  std::filesystem::remove_all(dir);
}

TEST_CASE("metrics: the summary to a full or closed stdout is an Error naming stdout", "[metrics]") {
  CHECK(summary_exit_code("/dev/null") == 0);
  CHECK(summary_exit_code("/dev/full") == 3);
  CHECK(summary_exit_code("") == 3);
}
