// Invariants every dataset the wide readers return must hold (what the trainers index by).
#pragma once
#include <cmath>

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

}  // namespace skew::fuzz
