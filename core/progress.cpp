#include "core/progress.hpp"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "core/timer.hpp"

namespace skew {
namespace {

// The in-place line on screen now, if any (one at a time: the work of one loop).
std::atomic<Progress*> g_shown{nullptr};

bool progress_wanted() {
  const char* setting = std::getenv("SKEW_PROGRESS");
  return setting == nullptr || std::string(setting) != "0";
}

// A rate with three significant digits, without exponents: "0.0123", "3.41", "42.7", "1234".
std::string format_rate(double rate) {
  char text[32];
  if (rate >= 100.0 || rate == 0.0)
    std::snprintf(text, sizeof text, "%.0f", rate);
  else
    std::snprintf(text, sizeof text, "%.*f", std::max(0, 2 - static_cast<int>(std::floor(std::log10(rate)))), rate);
  return text;
}

}  // namespace

ProgressRate progress_rate(std::int64_t done, std::int64_t left, double elapsed_seconds) {
  ProgressRate r;
  if (done <= 0 || elapsed_seconds <= 0.0) {
    r.eta_seconds = left > 0 ? std::numeric_limits<double>::infinity() : 0.0;
    return r;
  }
  r.per_second = static_cast<double>(done) / elapsed_seconds;
  r.eta_seconds = static_cast<double>(left) / r.per_second;
  return r;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char text[32];
  const auto whole = static_cast<std::int64_t>(std::llround(seconds));
  if (seconds < 9.95)
    std::snprintf(text, sizeof text, "%.1fs", seconds);
  else if (whole < 60)
    std::snprintf(text, sizeof text, "%llds", static_cast<long long>(whole));
  else if (whole < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", static_cast<long long>(whole / 60),
                  static_cast<long long>(whole % 60));
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", static_cast<long long>(whole / 3600),
                  static_cast<long long>(whole % 3600 / 60));
  return text;
}

Progress::Style Progress::style_for(std::FILE* out) {
  if (isatty(fileno(out))) return {true, 1.0, 0.25};
  return {false, 5.0, 5.0};
}

Progress::Progress(std::string label, std::int64_t start, std::int64_t total, std::string unit, bool enabled)
    : Progress(std::move(label), start, total, std::move(unit), enabled && progress_wanted() ? stderr : nullptr,
               style_for(stderr)) {}

Progress::Progress(std::string label, std::int64_t start, std::int64_t total, std::string unit, std::FILE* out,
                   Style style)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      start_(start),
      total_(total),
      out_(out),
      style_(style),
      started_(wall_seconds()),
      last_done_(start) {}

Progress::~Progress() {
  finish();
}

void Progress::finish() {
  Progress* self = this;
  g_shown.compare_exchange_strong(self, nullptr);  // before out_ goes: a log line may be clearing it
  std::FILE* const out = std::exchange(out_, nullptr);
  if (out == nullptr || last_shown_ < 0) return;
  // The closing line: where the work got to (all of it, or where it stopped).
  const std::string text = line(last_done_, wall_seconds() - started_);
  if (style_.in_place) {
    std::fprintf(out, "\r%s\033[K\n", text.c_str());
  } else if (last_done_ != last_shown_done_) {
    std::fprintf(out, "%s\n", text.c_str());
  }
  std::fflush(out);
}

std::string Progress::line(std::int64_t done, double elapsed_seconds) const {
  const ProgressRate rate = progress_rate(done - start_, total_ - done, elapsed_seconds);
  const double percent = total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
  char head[96];
  std::snprintf(head, sizeof head, "%lld/%lld ", static_cast<long long>(done), static_cast<long long>(total_));
  char share[16];
  std::snprintf(share, sizeof share, " (%.0f%%)", std::floor(percent));
  return label_ + ": " + head + unit_ + share + ", " + format_rate(rate.per_second) + " " + unit_ + "/s, elapsed " +
         format_duration(elapsed_seconds) + ", ETA " + (done >= total_ ? "0s" : format_duration(rate.eta_seconds));
}

void Progress::update(std::int64_t done) {
  if (out_ != nullptr) update(done, wall_seconds() - started_);
}

void Progress::update(std::int64_t done, double elapsed_seconds) {
  last_done_ = done;
  if (out_ == nullptr) return;
  const bool due =
      last_shown_ < 0 ? elapsed_seconds >= style_.first_after_s : elapsed_seconds - last_shown_ >= style_.every_s;
  if (!due) return;
  last_shown_ = elapsed_seconds;
  last_shown_done_ = done;
  const std::string text = line(done, elapsed_seconds);
  if (style_.in_place) {
    std::fprintf(out_, "\r%s\033[K", text.c_str());
    g_shown = this;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void Progress::clear_shown_line() {
  Progress* shown = g_shown.exchange(nullptr);
  std::FILE* const out = shown != nullptr ? shown->out_ : nullptr;
  if (out != nullptr) {
    std::fputs("\r\033[K", out);
    std::fflush(out);
  }
}

}  // namespace skew
