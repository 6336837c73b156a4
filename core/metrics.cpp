#include "core/metrics.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"

namespace skew {

namespace {
std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const bool quote = cells[i].find_first_of(",\"\n\r") != std::string::npos;
    if (i) line += ',';
    if (quote) {
      line += '"';
      for (char c : cells[i]) line += c == '"' ? std::string("\"\"") : std::string(1, c);
      line += '"';
    } else {
      line += cells[i];
    }
  }
  return line + '\n';
}
}  // namespace

JsonlWriter::JsonlWriter(const std::string& path, OutputFile::Mode mode) : path_(path) {
  if (!path.empty()) out_.open(path, mode);
}

void JsonlWriter::write(const Json& record) {
  if (!out_.is_open()) return;
  out_.write(record.dump() + '\n');  // one write per line: a crash loses at most this line
}

void keep_jsonl_records_before(const std::string& path, const std::string& counter, std::int64_t end) {
  if (path.empty() || !std::filesystem::exists(path)) return;
  const std::string text = read_file(path);
  std::string kept;
  std::size_t pos = 0, dropped = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    const std::size_t newline = text.find('\n', pos);
    const bool whole = newline != std::string::npos;
    const std::string line = text.substr(pos, whole ? newline - pos : std::string::npos);
    pos = whole ? newline + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json record = Json::parse(line, nullptr, false);
    if (record.is_discarded() && !whole) {  // a crash in the middle of the last write
      ++dropped;
      continue;
    }
    SKEW_CHECK(record.is_object() && record.contains(counter) && record[counter].is_number_integer(),
               path << ":" << line_no << " is not a metrics record with an integer \"" << counter << "\"");
    if (record[counter].get<std::int64_t>() < end)
      kept.append(line).push_back('\n');
    else
      ++dropped;
  }
  if (dropped == 0) return;
  SKEW_INFO(path << ": dropped " << dropped << " record(s) from " << counter << " " << end
                 << " on, which the resumed run writes again");
  write_file_atomic(path, kept);
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& columns)
    : path_(path),
      columns_(columns.size()),
      header_(csv_line(columns)),
      out_(path),
      exceptions_(std::uncaught_exceptions()) {}

CsvWriter::~CsvWriter() {
  if (!out_.is_open() || std::uncaught_exceptions() > exceptions_) return;  // failing: the old file stays
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
}

void CsvWriter::row(const std::vector<std::string>& cells) {
  SKEW_CHECK(cells.size() == columns_,
             "CSV row for '" << path_ << "' has " << cells.size() << " cells, header has " << columns_);
  std::string text = std::move(header_);  // pending only once, written or not
  header_.clear();
  out_.write(text + csv_line(cells));
}

void CsvWriter::close() {
  if (!out_.is_open()) return;
  const std::string header = std::move(header_);
  header_.clear();
  if (!header.empty()) out_.write(header);
  out_.close();
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
  write_stdout(summary.dump() + "\n", "the run summary");
}

}  // namespace skew
