// Metrics: JSONL lines parse back, CSV cells are quoted as RFC 4180 wants, the summary is one
// JSON line.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"
#include "lib/core/metrics.hpp"

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
