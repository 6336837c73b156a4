// Run outputs: JSONL metrics (one object per logged step, flushed per line so a crash loses
// at most the current line), CSV tables for benchmarks, and the one-line JSON run summary.
#pragma once
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace skew {

using Json = nlohmann::ordered_json;

class JsonlWriter {
 public:
  JsonlWriter() = default;               // disabled: write() does nothing
  explicit JsonlWriter(const std::string& path);  // empty path = disabled
  void write(const Json& record);
  bool enabled() const { return out_.is_open(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

class CsvWriter {
 public:
  CsvWriter(const std::string& path, const std::vector<std::string>& columns);
  void row(const std::vector<std::string>& cells);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::size_t columns_;
  std::ofstream out_;
};

// Calls `fn(record, where)` for every non-blank line of the JSONL file at `path`, where `where`
// is "PATH:LINE" for the caller's own messages. `what` names the file in errors ("cannot open
// routing trace 'x.jsonl'"); a line that is not JSON is an error naming its line.
void read_jsonl(const std::string& path, const std::string& what,
                const std::function<void(const Json& record, const std::string& where)>& fn);

std::string csv_number(double v);
// Prints `summary` as one JSON line on stdout (prefixed by nothing, so `tail -1 | jq` works).
void print_summary(const Json& summary);

}  // namespace skew
