// core/progress: the rate and ETA against their closed forms, durations for people, and when
// lines are written (plain lines at the interval off a terminal, one line rewritten in place on
// one, erased before a log line).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/progress.hpp"

namespace {

// Everything written to `file` so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("progress: rate and ETA are the closed forms done/elapsed and left*elapsed/done", "[progress]") {
  const auto r = skew::progress_rate(7, 13, 3.5);
  CHECK(r.per_second == Approx(2.0));
  CHECK(r.eta_seconds == Approx(6.5));
  // Over a spread of inputs the ETA is the time the left items take at the average rate so far.
  for (std::int64_t done : {1, 3, 250, 99999})
    for (std::int64_t left : {0, 1, 17, 123456})
      for (double elapsed : {0.01, 2.5, 3600.0}) {
        const auto x = skew::progress_rate(done, left, elapsed);
        CHECK(x.per_second == Approx(static_cast<double>(done) / elapsed));
        CHECK(x.eta_seconds == Approx(static_cast<double>(left) * elapsed / static_cast<double>(done)).margin(1e-12));
      }
  // Nothing done yet: no rate, an unknown ETA (unless nothing is left either).
  CHECK(skew::progress_rate(0, 10, 4.0).per_second == 0.0);
  CHECK(std::isinf(skew::progress_rate(0, 10, 4.0).eta_seconds));
  CHECK(skew::progress_rate(0, 0, 4.0).eta_seconds == 0.0);
}

TEST_CASE("progress: durations read as seconds, minutes:seconds or hours:minutes", "[progress]") {
  CHECK(skew::format_duration(0.44) == "0.4s");
  CHECK(skew::format_duration(9.94) == "9.9s");
  CHECK(skew::format_duration(9.96) == "10s");
  CHECK(skew::format_duration(42.4) == "42s");
  CHECK(skew::format_duration(59.6) == "1m00s");
  CHECK(skew::format_duration(185.0) == "3m05s");
  CHECK(skew::format_duration(7620.0) == "2h07m");
  CHECK(skew::format_duration(std::nan("")) == "?");
  CHECK(skew::format_duration(INFINITY) == "?");
}

TEST_CASE("progress: the line counts this run's items for the rate (a resumed run)", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    // 100 steps were done before; 250 more in 50 s: 5 steps/s, the 750 left take 150 s.
    skew::Progress p("train", 100, 1100, "steps", file, {false, 0.0, 0.0});
    CHECK(p.line(350, 50.0) == "train: 350/1100 steps (31%), 5.00 steps/s, elapsed 50s, ETA 2m30s");
    CHECK(p.line(100 + 3, 1000.0) == "train: 103/1100 steps (9%), 0.00300 steps/s, elapsed 16m40s, ETA 92h18m");
    CHECK(p.line(1100, 200.0) == "train: 1100/1100 steps (100%), 5.00 steps/s, elapsed 3m20s, ETA 0s");
    CHECK(p.line(100, 2.0) == "train: 100/1100 steps (9%), 0 steps/s, elapsed 2.0s, ETA ?");
  }
  std::fclose(file);
}

TEST_CASE("progress: off a terminal, a plain line at each interval and a closing line", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    skew::Progress p("replay", 0, 100, "iterations", file, {false, 5.0, 5.0});
    p.update(10, 1.0);
    p.update(40, 4.9);
    CHECK(contents(file).empty());  // short work prints nothing
    p.update(50, 5.0);
    p.update(60, 7.0);
    p.update(90, 10.5);
    p.update(100, 11.0);
    p.finish();
    const std::size_t closed = contents(file).size();
    p.update(100, 20.0);  // after finish(): nothing more, not even from the destructor
    CHECK(contents(file).size() == closed);
  }
  const std::string text = contents(file);
  CHECK(text ==
        "replay: 50/100 iterations (50%), 10.0 iterations/s, elapsed 5.0s, ETA 5.0s\n"
        "replay: 90/100 iterations (90%), 8.57 iterations/s, elapsed 11s, ETA 1.2s\n"
        "replay: 100/100 iterations (100%), " +
            text.substr(text.rfind("(100%), ") + 8));
  CHECK(count(text, "\n") == 3);
  CHECK(count(text, "\r") == 0);
  std::fclose(file);
}

TEST_CASE("progress: on a terminal, one line rewritten in place and erased before a log line", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    skew::Progress p("train", 0, 8, "epochs", file, {true, 1.0, 0.25});
    p.update(1, 0.5);  // before the first second: nothing
    p.update(2, 1.0);
    p.update(3, 1.1);  // within the interval: nothing
    p.update(4, 2.0);
    CHECK(contents(file) ==
          "\rtrain: 2/8 epochs (25%), 2.00 epochs/s, elapsed 1.0s, ETA 3.0s\033[K"
          "\rtrain: 4/8 epochs (50%), 2.00 epochs/s, elapsed 2.0s, ETA 2.0s\033[K");
    skew::Progress::clear_shown_line();
    CHECK(contents(file).size() > 3);
    CHECK(contents(file).substr(contents(file).size() - 4) == "\r\033[K");
    skew::Progress::clear_shown_line();  // nothing shown any more: nothing written
    CHECK(count(contents(file), "\r\033[K") == 1);
  }
  // The closing line ends with the newline; nothing before it did.
  const std::string text = contents(file);
  CHECK(count(text, "\n") == 1);
  CHECK(text.back() == '\n');
  CHECK(text.find("\rtrain: 4/8 epochs (50%)", text.rfind("\r\033[K")) != std::string::npos);
  std::fclose(file);
}
