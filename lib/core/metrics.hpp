// Run outputs: JSONL metrics (one object per logged step, flushed per line so a crash loses
// at most the current line), CSV tables for benchmarks, and the one-line JSON run summary.
#pragma once
#include <fstream>
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

std::string csv_number(double v);
// Prints `summary` as one JSON line on stdout (prefixed by nothing, so `tail -1 | jq` works).
void print_summary(const Json& summary);

}  // namespace skew
