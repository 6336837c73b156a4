// data.valid = auto: validation on a held-out split of data.train (issue 36, item 5), so a run
// given only its training file is validated on its own data, never on the built-in synthetic
// set. Each row is held out or kept by a hash of (seed, its global row number), so the split is
// the same on any number of ranks, in any run with the same seed, and needs no pass over the file.
#pragma once
#include <cstdint>

#include "lib/wide/dataset.hpp"

namespace skew::wide {

// Whether global row `row` is held out for validation: a uniform draw in [0, 1) from
// fmix64 of (seed, row), below `fraction`.
bool held_out(std::uint64_t row, double fraction, std::uint64_t seed);

// Moves the rows of `data` that held_out() picks (by data.first_row + their position) into the
// returned set, in their order; `data` keeps the others, in theirs. Both keep data's
// num_features and num_fields (the whole source's), so the model's shape does not change.
SparseDataset split_holdout(SparseDataset& data, double fraction, std::uint64_t seed);

}  // namespace skew::wide
