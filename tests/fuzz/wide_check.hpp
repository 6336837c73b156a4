// Invariants every dataset the wide readers return must hold (what the trainers index by).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "lib/wide/dataset.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace skew::fuzz {

inline void check_dataset(const wide::SparseDataset& d) {
  FUZZ_ASSERT(!d.row_ptr.empty() && d.row_ptr.front() == 0);
  FUZZ_ASSERT(d.row_ptr.size() == d.label.size() + 1);
  FUZZ_ASSERT(d.row_ptr.back() == d.nnz());
  FUZZ_ASSERT(d.field.size() == d.index.size() && d.value.size() == d.index.size());
  for (std::size_t r = 1; r < d.row_ptr.size(); ++r) FUZZ_ASSERT(d.row_ptr[r - 1] <= d.row_ptr[r]);
  for (const float y : d.label) FUZZ_ASSERT(y == 0.0f || y == 1.0f);
  FUZZ_ASSERT(d.num_features >= 0 && d.num_fields >= 1 && d.num_fields <= 65536);
  for (std::size_t j = 0; j < d.index.size(); ++j) {
    FUZZ_ASSERT(std::int64_t(d.index[j]) < d.num_features);
    FUZZ_ASSERT(int(d.field[j]) < d.num_fields);
    FUZZ_ASSERT(std::isfinite(d.value[j]));
  }
}

// One text-reader harness run: parse_text on the input, failing on the first bad line and
// skipping bad lines. A rejection must be a skew::Error naming NAME:LINE:COL; a parsed dataset
// must pass check_dataset.
inline void fuzz_text_reader(const std::uint8_t* data, std::size_t size, wide::TextFormat format,
                             const std::string& name) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string prefix = name + ":";
  for (const bool skip : {false, true}) {
    wide::ReadOptions o;
    o.skip_bad_lines = skip;
    wide::ReadReport report;
    try {
      const auto d = wide::parse_text(text, name, format, o, &report);
      check_dataset(d);
      FUZZ_ASSERT(report.skipped_lines == 0 || report.first_bad_line.rfind(prefix, 0) == 0);
    } catch (const Error& e) {
      FUZZ_ASSERT(!skip);
      FUZZ_ASSERT(std::string(e.what()).rfind(prefix, 0) == 0);
    }
  }
}

}  // namespace skew::fuzz
