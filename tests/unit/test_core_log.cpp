// Error macros carry the failed condition, the message and file:line; logging levels and the
// rank-0-only rule for progress lines.
#include <catch2/catch.hpp>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"

namespace {
void check_positive(int x) {
  SKEW_CHECK(x > 0, "x must be positive, got " << x);
}
}  // namespace

TEST_CASE("errors: SKEW_CHECK and SKEW_THROW name the condition, message and location", "[error]") {
  try {
    check_positive(-3);
    FAIL("no exception");
  } catch (const skew::Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith("check failed: x > 0: x must be positive, got -3 [test_core_log.cpp:"));
  }
  CHECK_NOTHROW(check_positive(1));
  CHECK_THROWS_WITH([] { SKEW_THROW("value " << 42 << " is bad"); }(),
                    Catch::Matches("value 42 is bad \\[test_core_log.cpp:[0-9]+\\]"));
}

TEST_CASE("log: levels, and progress only from rank 0 unless all ranks are asked for", "[log]") {
  using skew::log::Level;
  CHECK(skew::log::parse_level("debug") == Level::Debug);
  CHECK(skew::log::parse_level("warn") == Level::Warn);
  CHECK_THROWS_WITH(skew::log::parse_level("loud"), Catch::Contains("unknown log level 'loud'"));

  skew::log::set_level(Level::Info);
  skew::log::set_rank(0, 4);
  CHECK(skew::log::enabled(Level::Info));
  CHECK_FALSE(skew::log::enabled(Level::Debug));
  skew::log::set_rank(2, 4);
  CHECK_FALSE(skew::log::enabled(Level::Info));
  CHECK(skew::log::enabled(Level::Warn));
  CHECK(skew::log::enabled(Level::Error));
  skew::log::set_all_ranks(true);
  CHECK(skew::log::enabled(Level::Info));
  skew::log::set_level(Level::Warn);
  CHECK_FALSE(skew::log::enabled(Level::Info));
  CHECK(skew::log::enabled(Level::Warn));
  SKEW_WARN("a warning line from the log test, rank " << 2);
  // Restore the defaults for the other cases in this binary.
  skew::log::set_level(Level::Info);
  skew::log::set_all_ranks(false);
  skew::log::set_rank(0, 1);
}
