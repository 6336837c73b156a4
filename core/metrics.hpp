// Run outputs: JSONL metrics (one object per logged step, handed to the kernel per line so a
// crash loses at most the current line), CSV tables for benchmarks, and the one-line JSON run
// summary. Files go through OutputFile (core/fileio.hpp): opened at construction, so an
// unwritable path fails at once; an earlier run's file is replaced only at the first record;
// every write is checked, and a failed one is a skew::Error naming the file and the OS reason.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fileio.hpp"

namespace skew {

using Json = nlohmann::ordered_json;

class JsonlWriter {
 public:
  JsonlWriter() = default;  // disabled: write() does nothing
  // Empty path = disabled. Append: after the records already in the file (a resumed run's).
  explicit JsonlWriter(const std::string& path, OutputFile::Mode mode = OutputFile::Mode::Replace);
  void write(const Json& record);
  bool enabled() const { return out_.is_open(); }
  const std::string& path() const { return path_; }
  void close() { out_.close(); }  // checked; the destructor closes too, reporting on stderr

 private:
  std::string path_;
  OutputFile out_;
};

// Before a resumed run appends to its JSONL output: keeps the records whose integer `counter`
// field (the iteration or step) is below `end`, drops those at or after it (the resumed run
// writes them again) and a torn last line (a crash in the middle of a write). A line that is
// not such a record is an error naming path:line. Nothing to do for an empty path or no file.
void keep_jsonl_records_before(const std::string& path, const std::string& counter, std::int64_t end);

// The header goes out with the first row (or at close(), for a table without rows).
class CsvWriter {
 public:
  CsvWriter(const std::string& path, const std::vector<std::string>& columns);
  ~CsvWriter();
  CsvWriter(CsvWriter&&) = default;
  void row(const std::vector<std::string>& cells);
  // Writes the header if no row did, and closes, checked. The destructor does the same when
  // the run did not fail, but can only log an error.
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::size_t columns_;
  std::string header_;  // until written
  OutputFile out_;
  int exceptions_;  // std::uncaught_exceptions() at construction: more in the destructor = failing
};

// Calls `fn(record, where)` for every non-blank line of the JSONL file at `path`, where `where`
// is "PATH:LINE" for the caller's own messages. `what` names the file in errors ("cannot open
// routing trace 'x.jsonl'"); a line that is not JSON is an error naming its line.
void read_jsonl(const std::string& path, const std::string& what,
                const std::function<void(const Json& record, const std::string& where)>& fn);

std::string csv_number(double v);
// Prints `summary` as one JSON line on stdout (prefixed by nothing, so `tail -1 | jq` works).
// A failed write (stdout on a full disk or closed) is an Error.
void print_summary(const Json& summary);

}  // namespace skew
