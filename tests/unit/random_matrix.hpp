// Test matrices for the GEMM tests: n values uniform in [-1, 1) from the Philox stream (seed,
// stream), so every element is non-trivial and bf16 rounding changes most of them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.hpp"

inline std::vector<float> random_matrix(std::size_t n, std::uint64_t seed, std::uint64_t stream) {
  skew::Rng rng(seed, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = 2.0f * rng.uniform() - 1.0f;
  return v;
}
