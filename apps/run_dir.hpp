// The run directory every training app writes by default (issue 34, item 2), and the start-up
// check that each output path can be written (issue 38), so a bad path fails before any work.
//
// output.dir = auto (the default) makes a new directory out/<app>/<UTC time>-<pid>/ under the
// working directory (a suffix -2, -3, ... if that name exists: an earlier run is never written
// into); rank 0 picks the name and every rank receives it. An explicit directory is used as it
// is (created if missing; a resume names the run it continues); empty turns the run directory off.
// The directory holds config.ini (the configuration as resolved: --config config.ini runs the
// same training again, into a new directory), summary.json and whatever the app's path keys
// put there: a path key's value "{run}/NAME" is NAME in the run directory, or no file at all when
// output.dir is empty. An explicit path key wins over its {run} default.
#pragma once
#include <string>

#include "core/config.hpp"
#include "core/metrics.hpp"
#include "mpi/process_group.hpp"

namespace skew {

// The output.dir key; `holds` says what the app writes there ("config.ini, metrics.jsonl, ...").
void add_run_dir_key(Schema& schema, const std::string& holds);

// output.resume continues a run: refused, naming the keys, when output.dir = auto and
// output.checkpoint_dir is in it, since a new run directory has nothing to resume.
void check_resume_names_a_run(const Config& config);

// A path key's `value` with a leading "{run}" replaced by `run_dir`, or "" (no file) when run_dir
// is empty; any other value as it is.
std::string in_run_dir(const std::string& value, const std::string& run_dir);

class RunDir {
 public:
  // Collective over `world`: rank 0 resolves output.dir (auto: a new directory), creates it,
  // checks it can be written, writes config.ini and prints the path; every rank gets the path.
  RunDir(const Config& config, comm::ProcessGroup& world);
  // The directory; empty when output.dir is (the options read it with in_run_dir).
  const std::string& path() const { return path_; }
  // Rank 0 at the end: summary.json, then the path again (announce_end alone where the library
  // writes the summary itself).
  void finish(const Json& summary) const;
  void announce_end() const;

 private:
  std::string app_, path_;
  int rank_ = 0;
};

// Start-up checks, each an Error naming `key` and the path with the OS's reason: a directory is
// created if missing and a file created and removed in it; a file's directory is created and the
// file opened for writing without truncating it (removed again when the check created it).
// Empty paths are not checked.
void require_writable_dir(const std::string& key, const std::string& dir);
void require_writable_file(const std::string& key, const std::string& path);

}  // namespace skew
