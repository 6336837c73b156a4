// The benchmarks' printed tables: figures to a few significant digits (not a double's 17), in
// columns aligned for reading: text left, numbers right. Machine-readable copies (CSV, JSON) keep
// full precision.
#pragma once
#include <string>
#include <vector>

namespace skew::bench {

// `value` to `digits` significant digits: fixed notation from 1e-3 up to 1e6 ("0.001235",
// "12.35", "1235", "123500"), scientific outside it ("1.235e+07"); "0", "nan", "inf", "-inf".
std::string significant(double value, int digits = 4);

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> columns);
  // One row, a cell per column (throws otherwise).
  void row(std::vector<std::string> cells);
  // The header and the rows, each line starting with `prefix`, columns two spaces apart: a column
  // whose every cell is a number is right-aligned, any other left-aligned.
  std::string text(const std::string& prefix = "") const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace skew::bench
