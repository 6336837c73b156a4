// One line of progress for long work (training loops, placement_sim's replay): "label: n/N unit
// (p%), rate unit/s, elapsed T, ETA E". On a terminal the line is rewritten in place with \r;
// otherwise (a log file, a pipe) a plain line is written every few seconds so the log stays
// readable. Short work prints nothing: the first line comes only after a second (terminal) or
// after the first interval (otherwise). It goes to stderr, never to the results; SKEW_PROGRESS=0
// in the environment turns it off.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace skew {

struct ProgressRate {
  double per_second = 0.0;   // items done per second so far
  double eta_seconds = 0.0;  // seconds the items left take at that rate (infinite before the first)
};

// The rate of `done` items in `elapsed_seconds` and the time the `left` items still take at it.
ProgressRate progress_rate(std::int64_t done, std::int64_t left, double elapsed_seconds);

// A duration for people: "0.4s", "42s", "3m05s", "2h07m"; "?" where not finite.
std::string format_duration(double seconds);

class Progress {
 public:
  // How the line is written: rewritten in place or as plain lines, when the first comes and how
  // often the next ones may.
  struct Style {
    bool in_place = false;
    double first_after_s = 5.0;
    double every_s = 5.0;
  };
  // The style for `out`: in place on a terminal (first after 1 s, then every 0.25 s), else plain
  // lines every 5 s.
  static Style style_for(std::FILE* out);

  // Progress of `total` items (`unit`, e.g. "steps") of which `start` were done before this run
  // (a resumed run): the rate counts only this run's. Writes to stderr where `enabled` and
  // SKEW_PROGRESS is not 0.
  Progress(std::string label, std::int64_t start, std::int64_t total, std::string unit, bool enabled = true);
  // The same writing to `out` in `style` (tests).
  Progress(std::string label, std::int64_t start, std::int64_t total, std::string unit, std::FILE* out, Style style);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // `done` items are done now (steady clock), or at `elapsed_seconds` since construction.
  void update(std::int64_t done);
  void update(std::int64_t done, double elapsed_seconds);
  // Writes the closing line (where the work got to) if any line was shown; later updates write
  // nothing. The destructor calls it.
  void finish();
  // The line for `done` items at `elapsed_seconds`.
  std::string line(std::int64_t done, double elapsed_seconds) const;

  // Erases an in-place line being shown, so a log line written next starts at the left margin;
  // the next update draws it again. Called by skew::log before every line.
  static void clear_shown_line();

 private:
  std::string label_, unit_;
  std::int64_t start_, total_;
  std::FILE* out_;
  Style style_;
  double started_, last_shown_ = -1.0;  // seconds since construction of the last line, or -1
  std::int64_t last_done_, last_shown_done_ = -1;
};

}  // namespace skew
