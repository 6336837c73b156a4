#include "core/log.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>

#include "core/error.hpp"
#include "core/progress.hpp"

namespace skew::log {
namespace {
int g_rank = 0;
int g_world = 1;
Level g_level = Level::Info;
bool g_all_ranks = false;
std::mutex g_mutex;
const auto g_start = std::chrono::steady_clock::now();
const char* level_name(Level l) {
  switch (l) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "WARN";
    case Level::Error: return "ERROR";
  }
  return "?";
}
}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}
void set_level(Level level) {
  g_level = level;
}
void set_all_ranks(bool all_ranks) {
  g_all_ranks = all_ranks;
}

Level parse_level(const std::string& name) {
  if (name == "debug") return Level::Debug;
  if (name == "info") return Level::Info;
  if (name == "warn") return Level::Warn;
  if (name == "error") return Level::Error;
  SKEW_THROW("unknown log level '" << name << "' (expected debug, info, warn or error)");
}

bool enabled(Level level) {
  if (level < g_level) return false;
  if (level >= Level::Warn) return true;
  return g_all_ranks || g_rank == 0;
}

double seconds_since_start() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

void write(Level level, const std::string& message) {
  const double t = seconds_since_start();
  std::lock_guard<std::mutex> lock(g_mutex);
  Progress::clear_shown_line();  // a log line starts at the left margin, not after a progress line
  std::FILE* out = level >= Level::Warn ? stderr : stdout;
  std::fprintf(out, "[%8.2fs rank %d/%d %s] %s\n", t, g_rank, g_world, level_name(level), message.c_str());
  std::fflush(out);
}

}  // namespace skew::log
