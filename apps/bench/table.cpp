#include "apps/bench/table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace skew::bench {

std::string significant(double value, int digits) {
  SKEW_CHECK(digits >= 1 && digits <= 17, "program error: " << digits << " significant digits");
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return "0";
  char text[64];
  // The exponent after rounding to `digits` (9.9996 to 4 digits is 10.00, exponent 1).
  std::snprintf(text, sizeof text, "%.*e", digits - 1, value);
  const int exponent = std::atoi(std::strchr(text, 'e') + 1);
  if (exponent < -3 || exponent >= 6) return text;
  const int decimals = digits - 1 - exponent;
  if (decimals > 0) {
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
  } else {
    const double unit = std::pow(10.0, -decimals);  // the last significant digit's place
    std::snprintf(text, sizeof text, "%.0f", std::round(value / unit) * unit);
  }
  return text;
}

TextTable::TextTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}

void TextTable::row(std::vector<std::string> cells) {
  SKEW_CHECK(cells.size() == columns_.size(),
             "program error: a table row of " << cells.size() << " cells under " << columns_.size() << " columns");
  rows_.push_back(std::move(cells));
}

std::string TextTable::text(const std::string& prefix) const {
  const auto is_number = [](const std::string& cell) {
    char* end = nullptr;
    std::strtod(cell.c_str(), &end);
    return !cell.empty() && end == cell.c_str() + cell.size();
  };
  std::vector<std::size_t> width(columns_.size());
  std::vector<bool> right(columns_.size(), !rows_.empty());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].size();
    for (const auto& r : rows_) {
      width[c] = std::max(width[c], r[c].size());
      right[c] = right[c] && is_number(r[c]);
    }
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text = prefix;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      text += (c ? "  " : "") + (right[c] ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : ""));
    }
    out += text + "\n";
  };
  line(columns_);
  for (const auto& r : rows_) line(r);
  return out;
}

}  // namespace skew::bench
