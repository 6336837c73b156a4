// The run directory and the start-up output checks: see run_dir.hpp.
#include "apps/run_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"

namespace skew {
namespace {
namespace fs = std::filesystem;

constexpr const char* kRunPrefix = "{run}";

// out/<app>/<UTC time>-<pid>, with -2, -3, ... appended until mkdir creates a new directory.
std::string new_run_dir(const std::string& app) {
  const std::string parent = "out/" + app;
  try {
    make_directories(parent);
  } catch (const Error& e) {
    SKEW_THROW("output.dir = auto: " << e.what() << " (set output.dir to a writable directory, or empty for none)");
  }
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  const std::string base = parent + "/" + stamp + "-" + std::to_string(::getpid());
  for (int n = 1;; ++n) {
    const std::string dir = n == 1 ? base : base + "-" + std::to_string(n);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST)
      SKEW_THROW("output.dir = auto: cannot create directory '"
                 << dir << "': " << std::strerror(errno)
                 << " (set output.dir to a writable directory, or empty for none)");
  }
}

// Rank 0's path to every rank: its length, then its bytes.
std::string broadcast_from_rank0(comm::ProcessGroup& world, std::string text) {
  std::int64_t size = static_cast<std::int64_t>(text.size());
  world.broadcast(comm::view(&size, 1), 0);
  std::vector<std::uint8_t> bytes(text.begin(), text.end());
  bytes.resize(static_cast<std::size_t>(size));
  if (size > 0) world.broadcast(comm::view(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

[[noreturn]] void cannot_write(const std::string& key, const std::string& path, const std::string& what, int err) {
  SKEW_THROW(key << " = '" << path << "': cannot " << what << ": " << std::strerror(err)
                 << " (choose a writable path; the check runs before any work)");
}
}  // namespace

void add_run_dir_key(Schema& schema, const std::string& holds) {
  schema.add_string("output.dir", "auto",
                    "run directory for " + holds + "; auto = a new directory out/" + schema.app() +
                        "/TIME-PID/ in the working directory (TIME in UTC: 20261206T070000Z), empty = none; "
                        "a path key's value starting with {run} names a file in it");
}

RunDir::RunDir(const Config& config, comm::ProcessGroup& world) : app_(config.schema().app()), rank_(world.rank()) {
  std::string chosen;
  // Rank 0 has written config.ini before any rank goes on: a rank that fails next (and ends the
  // job) cannot cut the write short.
  if (rank_ == 0) {
    const std::string requested = config.get_string("output.dir");
    chosen = requested == "auto" ? new_run_dir(app_) : requested;
    require_writable_dir("output.dir", chosen);
    if (!chosen.empty()) {
      write_file_atomic(chosen + "/config.ini", "# run directory " + chosen +
                                                    "; --config this file trains the same run again (output.dir = "
                                                    "auto: into a new directory)\n" +
                                                    config.to_ini());
      SKEW_INFO(app_ << ": run directory " << chosen);
    }
  }
  path_ = broadcast_from_rank0(world, chosen);
}

void check_resume_names_a_run(const Config& config) {
  if (!config.get_bool("output.resume") || config.get_string("output.dir") != "auto") return;
  if (config.get_string("output.checkpoint_dir").rfind(kRunPrefix, 0) != 0) return;
  SKEW_THROW(
      "output.resume = true needs output.checkpoint_dir or output.dir naming the run to continue "
      "(--output.dir=out/"
      << config.schema().app()
      << "/<run>: its checkpoints/); output.dir = auto would start a new, empty run directory");
}

std::string in_run_dir(const std::string& value, const std::string& run_dir) {
  if (value.rfind(kRunPrefix, 0) != 0) return value;
  return run_dir.empty() ? "" : run_dir + value.substr(std::strlen(kRunPrefix));
}

void RunDir::finish(const Json& summary) const {
  if (rank_ != 0 || path_.empty()) return;
  write_file_atomic(path_ + "/summary.json", summary.dump() + "\n");
  announce_end();
}

void RunDir::announce_end() const {
  if (rank_ != 0 || path_.empty()) return;
  SKEW_INFO(app_ << ": run directory " << path_ << " (config.ini, summary.json and the run's outputs)");
}

void require_writable_dir(const std::string& key, const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) cannot_write(key, dir, "create the directory", ec.value());
  const std::string probe = dir + "/.write_check." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) cannot_write(key, dir, "create a file in the directory", errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

void require_writable_file(const std::string& key, const std::string& path) {
  if (path.empty()) return;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) cannot_write(key, path, "create its directory '" + parent.string() + "'", ec.value());
  struct stat st {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) cannot_write(key, path, "write it", EISDIR);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) cannot_write(key, path, "open it for writing", errno);
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

}  // namespace skew
