// Comparison of two runs of the dense GPT block chain (lib/moe/dense_block.hpp).
#pragma once
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "lib/moe/dense_block.hpp"

namespace skew::test {

// got and want agree on the loss and on every named value: |got - want| <= relative * |want|
// + scaled * (the largest |want| of that tensor), so entries near zero in a tensor of large
// ones are held to the tensor's scale, not their own.
inline void require_same_run(const moe::DenseBlockRun& got, const moe::DenseBlockRun& want, double relative,
                             double scaled) {
  CHECK(got.loss == Approx(want.loss).epsilon(relative));
  CHECK(got.gradient_squares == Approx(want.gradient_squares).epsilon(10 * relative));
  REQUIRE(got.values.size() == want.values.size());
  for (const auto& [name, expected] : want.values) {
    INFO("tensor " << name);
    REQUIRE(got.values.count(name) == 1);
    const std::vector<double>& actual = got.values.at(name);
    REQUIRE(actual.size() == expected.size());
    double largest = 0;
    for (double x : expected) largest = std::max(largest, std::abs(x));
    CHECK(largest > 0);  // every tensor of the chain carries signal: a zero one would compare vacuously
    std::size_t worst = 0;
    double worst_excess = -1;  // the largest |diff| / tolerance, reported once per tensor
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const double excess = std::abs(actual[i] - expected[i]) / (relative * std::abs(expected[i]) + scaled * largest);
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    INFO("worst index " << worst << ": got " << actual[worst] << ", want " << expected[worst] << " (largest |want| "
                        << largest << ")");
    CHECK(worst_excess <= 1.0);
  }
}

}  // namespace skew::test
