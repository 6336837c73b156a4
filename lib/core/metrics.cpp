#include "lib/core/metrics.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"

namespace skew {

namespace {
void open_for_write(std::ofstream& out, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) make_directories(p.parent_path().string());
  out.open(path, std::ios::out | std::ios::trunc);
  SKEW_CHECK(out.is_open(), "cannot open '" << path << "' for writing");
}
}  // namespace

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  if (!path.empty()) open_for_write(out_, path);
}

void JsonlWriter::write(const Json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& columns)
    : path_(path), columns_(columns.size()) {
  open_for_write(out_, path);
  row(columns);
}

void CsvWriter::row(const std::vector<std::string>& cells) {
  SKEW_CHECK(cells.size() == columns_, "CSV row for '" << path_ << "' has " << cells.size() << " cells, header has " << columns_);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const bool quote = cells[i].find_first_of(",\"\n\r") != std::string::npos;
    if (i) out_ << ',';
    if (quote) {
      out_ << '"';
      for (char c : cells[i]) out_ << (c == '"' ? "\"\"" : std::string(1, c));
      out_ << '"';
    } else {
      out_ << cells[i];
    }
  }
  out_ << '\n';
  out_.flush();
}

void read_jsonl(const std::string& path, const std::string& what,
                const std::function<void(const Json& record, const std::string& where)>& fn) {
  std::ifstream in(path);
  SKEW_CHECK(in.is_open(), "cannot open " << what << " '" << path << "'");
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    Json record;
    try {
      record = Json::parse(line);
    } catch (const std::exception& e) {
      throw Error(where + ": not JSON: " + e.what());
    }
    fn(record, where);
  }
}

std::string csv_number(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

void print_summary(const Json& summary) {
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
}

}  // namespace skew
