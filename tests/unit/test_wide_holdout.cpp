// data.valid = auto's held-out split (lib/wide/holdout.hpp): the share held out is the fraction's
// binomial draw, rows move whole and in order, the split is the seed's and the row numbers' alone
// (so rank slices of a file split as the whole file does), and fraction 0 holds nothing out.
#include <catch2/catch.hpp>
#include <cmath>

#include "lib/wide/holdout.hpp"

using namespace skew::wide;

namespace {
// `rows` rows numbered from `first_row`, row r holding (r % 5) + 1 nonzeros whose ids, fields and
// values and whose label all derive from r, so a row is recognisable wherever it goes.
SparseDataset numbered_rows(std::int64_t rows, std::int64_t first_row = 0) {
  SparseDataset d;
  d.num_features = 1 << 20;
  d.num_fields = 7;
  d.first_row = first_row;
  for (std::int64_t r = first_row; r < first_row + rows; ++r) {
    std::vector<std::uint32_t> idx;
    std::vector<std::uint16_t> fld;
    std::vector<float> val;
    for (std::int64_t e = 0; e <= r % 5; ++e) {
      idx.push_back(std::uint32_t(r * 8 + e));
      fld.push_back(std::uint16_t(e));
      val.push_back(float(r) + 0.5f * float(e));
    }
    d.append_row(idx.data(), fld.data(), val.data(), idx.size(), float(r % 3 == 0));
  }
  return d;
}

// The row number a row of numbered_rows() was built from (its first id / 8).
std::int64_t row_number(const SparseDataset& d, std::int64_t r) {
  return std::int64_t(d.index[std::size_t(d.row_ptr[std::size_t(r)])] / 8);
}

// Whether row r of `d` is numbered_rows()' row `number`, nonzero for nonzero.
bool is_row(const SparseDataset& d, std::int64_t r, std::int64_t number) {
  const SparseDataset one = numbered_rows(1, number);
  const std::int64_t begin = d.row_ptr[std::size_t(r)], n = d.row_ptr[std::size_t(r) + 1] - begin;
  if (n != one.nnz() || d.label[std::size_t(r)] != one.label[0]) return false;
  for (std::int64_t e = 0; e < n; ++e) {
    const std::size_t at = std::size_t(begin + e);
    if (d.index[at] != one.index[std::size_t(e)] || d.field[at] != one.field[std::size_t(e)] ||
        d.value[at] != one.value[std::size_t(e)])
      return false;
  }
  return true;
}
}  // namespace

TEST_CASE("held-out split: the fraction's share, whole rows in order, nothing lost") {
  const std::int64_t n = 20000;
  for (const double fraction : {0.1, 0.25, 0.5}) {
    SparseDataset train = numbered_rows(n);
    const SparseDataset valid = split_holdout(train, fraction, 1);
    INFO("fraction " << fraction);
    REQUIRE(train.rows() + valid.rows() == n);
    // Binomial(n, fraction): within 5 standard deviations of n * fraction.
    CHECK(std::abs(double(valid.rows()) - n * fraction) < 5 * std::sqrt(n * fraction * (1 - fraction)));
    CHECK(train.num_features == 1 << 20);
    CHECK(valid.num_features == 1 << 20);
    CHECK(train.num_fields == 7);
    CHECK(valid.num_fields == 7);
    // Merging the two by row number gives back 0..n-1, every row intact and on its side.
    std::int64_t t = 0, v = 0;
    for (std::int64_t r = 0; r < n; ++r) {
      const bool out = held_out(std::uint64_t(r), fraction, 1);
      const SparseDataset& side = out ? valid : train;
      std::int64_t& at = out ? v : t;
      REQUIRE(at < side.rows());
      REQUIRE(row_number(side, at) == r);
      REQUIRE(is_row(side, at, r));
      ++at;
    }
    CHECK(t == train.rows());
    CHECK(v == valid.rows());
  }
}

TEST_CASE("held-out split: the seed's and the row numbers' alone") {
  SparseDataset a = numbered_rows(5000), b = numbered_rows(5000), c = numbered_rows(5000);
  const SparseDataset va = split_holdout(a, 0.1, 7), vb = split_holdout(b, 0.1, 7), vc = split_holdout(c, 0.1, 8);
  CHECK(va.index == vb.index);
  CHECK(va.label == vb.label);
  CHECK(va.index != vc.index);  // another seed, other rows
  // Two rank slices, [0, 2000) and [2000, 5000) (first_row set as a rank's load sets it), hold
  // out between them exactly the rows the whole file does.
  SparseDataset first = numbered_rows(2000, 0), second = numbered_rows(3000, 2000);
  SparseDataset held = split_holdout(first, 0.1, 7);
  const SparseDataset held_second = split_holdout(second, 0.1, 7);
  for (std::int64_t r = 0; r < held_second.rows(); ++r) {
    const std::int64_t begin = held_second.row_ptr[std::size_t(r)], end = held_second.row_ptr[std::size_t(r) + 1];
    held.append_row(&held_second.index[std::size_t(begin)], &held_second.field[std::size_t(begin)],
                    &held_second.value[std::size_t(begin)], std::size_t(end - begin),
                    held_second.label[std::size_t(r)]);
  }
  CHECK(held.index == va.index);
  CHECK(held.value == va.value);
  CHECK(held.label == va.label);
}

TEST_CASE("held-out split: fraction 0 holds nothing out") {
  SparseDataset train = numbered_rows(3000);
  const SparseDataset before = train;
  const SparseDataset valid = split_holdout(train, 0, 3);
  CHECK(valid.rows() == 0);
  CHECK(train.index == before.index);
  CHECK(train.label == before.label);
}
