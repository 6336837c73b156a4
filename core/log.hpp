// Rank-prefixed leveled logging. Progress (INFO) is printed by rank 0 only unless
// `log.all_ranks` is set; WARN and ERROR are printed by every rank.
#pragma once
#include <sstream>
#include <string>

namespace skew::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

void set_rank(int rank, int world_size);
void set_level(Level level);
void set_all_ranks(bool all_ranks);
Level parse_level(const std::string& name);  // "debug" | "info" | "warn" | "error"
bool enabled(Level level);
void write(Level level, const std::string& message);
// The clock of the log lines: seconds since the process started (its static initialisation).
double seconds_since_start();

}  // namespace skew::log

#define SKEW_LOG(level, msg)                                              \
  do {                                                                    \
    if (::skew::log::enabled(::skew::log::Level::level)) {                \
      std::ostringstream skew_log_oss_;                                   \
      skew_log_oss_ << msg;                                               \
      ::skew::log::write(::skew::log::Level::level, skew_log_oss_.str()); \
    }                                                                     \
  } while (0)
#define SKEW_INFO(msg) SKEW_LOG(Info, msg)
#define SKEW_WARN(msg) SKEW_LOG(Warn, msg)
#define SKEW_DEBUG(msg) SKEW_LOG(Debug, msg)
