#include "lib/wide/holdout.hpp"

namespace skew::wide {

bool held_out(std::uint64_t row, double fraction, std::uint64_t seed) {
  // The top 53 bits of the mix as a double in [0, 1); the seed goes through fmix64 first so
  // that seeds s and s + 1 do not hold out shifted copies of one pattern.
  const std::uint64_t bits = fmix64(row ^ fmix64(seed + kFeatureHashSeed));
  return double(bits >> 11) * 0x1.0p-53 < fraction;
}

SparseDataset split_holdout(SparseDataset& data, double fraction, std::uint64_t seed) {
  SparseDataset kept, held;
  for (SparseDataset* part : {&kept, &held}) {
    part->num_features = data.num_features;
    part->num_fields = data.num_fields;
  }
  kept.first_row = data.first_row;
  for (std::int64_t r = 0; r < data.rows(); ++r) {
    const std::size_t begin = std::size_t(data.row_ptr[std::size_t(r)]);
    const std::size_t n = std::size_t(data.row_ptr[std::size_t(r) + 1]) - begin;
    SparseDataset& to = held_out(std::uint64_t(data.first_row + r), fraction, seed) ? held : kept;
    to.append_row(&data.index[begin], &data.field[begin], &data.value[begin], n, data.label[std::size_t(r)]);
  }
  data = std::move(kept);
  return held;
}

}  // namespace skew::wide
