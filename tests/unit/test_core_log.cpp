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

TEST_CASE("errors: the message is for the user, the condition and location for developers", "[error]") {
  try {
    check_positive(-3);
    FAIL("no exception");
  } catch (const skew::Error& e) {
    CHECK(std::string(e.what()) == "x must be positive, got -3");
    CHECK_THAT(e.where(), Catch::Matches("test_core_log.cpp:[0-9]+: check failed: x > 0"));
  }
  CHECK_NOTHROW(check_positive(1));
  try {
    SKEW_THROW("value " << 42 << " is bad");
  } catch (const skew::Error& e) {
    CHECK(std::string(e.what()) == "value 42 is bad");
    CHECK_THAT(e.where(), Catch::Matches("test_core_log.cpp:[0-9]+"));
  }
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
