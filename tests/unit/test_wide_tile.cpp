// The index arithmetic and per-pair bodies of the CUDA wide kernels (kernels/wide_tile.hpp,
// kernels/wide_ffm.hpp), run on the CPU against brute-force loops and the float64 reference:
// the GPU kernels call the same functions, so these cover their indexing where no GPU runs.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "core/rng.hpp"
#include "kernels/wide_ffm.hpp"
#include "kernels/wide_tile.hpp"
#include "tests/unit/wide_reference.hpp"

using namespace skew;
using namespace skew::kernels;
using namespace skew::wide::reference;

TEST_CASE("wide_pair_of enumerates the pairs a < b row-major, for every count of entries") {
  for (std::int64_t n : {2, 3, 4, 5, 31, 32, 33, 39, 40, 1000, 46341, 100001}) {
    const std::int64_t pairs = wide_pair_count(n);
    // Every pair of small counts; for large ones, the first, middle and last pair of the first
    // and last rows and of every 997th (the square root's rounding matters most there).
    std::int64_t row_start = 0;  // pairs before row a, counted
    for (std::int64_t a = 0; a + 1 < n; row_start += n - 1 - a, ++a) {
      if (n > 1000 && a > 2 && a < n - 4 && a % 997 != 0) continue;
      for (std::int64_t b = a + 1; b < n; ++b) {
        if (n > 1000 && b != a + 1 && b != (a + n) / 2 && b != n - 1) continue;
        const WidePair got = wide_pair_of(row_start + b - a - 1, n);
        INFO("n " << n << " a " << a << " b " << b);
        REQUIRE(got.a == a);
        REQUIRE(got.b == b);
      }
    }
    const std::int64_t p = row_start;
    REQUIRE(p == pairs);
  }
}

namespace {

// The warp's segmented suffix sum as the flow kernel runs it, lockstep over 32 lanes (a lane
// outside the window reads its own value, as __shfl_down_sync returns it).
std::vector<double> segmented_sums(const std::vector<std::uint32_t>& keys, std::vector<double> v) {
  const int width = int(keys.size());
  for (int offset = 1; offset < width; offset *= 2) {
    std::vector<double> next = v;
    for (int lane = 0; lane < width; ++lane)
      if (wide_run_takes(keys.data(), width, lane, offset)) next[std::size_t(lane)] += v[std::size_t(lane + offset)];
    v = next;
  }
  return v;
}

}  // namespace

TEST_CASE("the segmented warp reduction leaves each run's sum in its first lane") {
  Rng rng(3, 0);
  for (int trial = 0; trial < 500; ++trial) {
    // Sorted keys with runs from 1 to 32 long (a hot feature may fill the window), the tail
    // past the tile's entries set to kWideNoKey as the kernel does.
    std::vector<std::uint32_t> keys(32);
    const int live = 1 + int(rng.uniform() * 32) % 32;
    std::uint32_t key = std::uint32_t(rng.uniform() * 10);
    const double long_runs = trial % 3 == 0 ? 0.95 : 0.5;
    for (int lane = 0; lane < 32; ++lane) {
      if (lane > 0 && rng.uniform() > long_runs) key += 1 + std::uint32_t(rng.uniform() * 3);
      keys[std::size_t(lane)] = lane < live ? key : kWideNoKey;
    }
    std::vector<double> v(32, 0.0);
    std::map<std::uint32_t, double> brute;
    for (int lane = 0; lane < live; ++lane) {
      v[std::size_t(lane)] = std::floor(rng.uniform() * 100) - 50;  // integers: sums exact in any order
      brute[keys[std::size_t(lane)]] += v[std::size_t(lane)];
    }
    const std::vector<double> sums = segmented_sums(keys, v);
    std::map<std::uint32_t, double> written;
    for (int lane = 0; lane < live; ++lane)
      if (wide_run_head(keys.data(), lane)) {
        INFO("trial " << trial << " lane " << lane);
        REQUIRE(written.count(keys[std::size_t(lane)]) == 0);  // one write per run
        written[keys[std::size_t(lane)]] = sums[std::size_t(lane)];
      }
    REQUIRE(written == brute);
  }
}

TEST_CASE("FFM linear terms and wide_pair_of pairs give the float64 logits and gradients (ragged rows)") {
  const Setup s = make_ragged_setup(WideKind::FFM, 80);
  const BatchReference ref = batch_reference(s);
  const WideBatch b = s.data.batch(0, s.data.rows());
  const int k = s.shape.k, row_len = s.shape.row_len();
  const float* params = s.model.params.data();
  std::vector<float> grad(s.model.params.size(), 0.0f), logits;
  const auto add = [](float* dst, float v) { *dst += v; };
  // The flow kernel's work list per sample, one item at a time in a lane-strided order (lane
  // 0's items, then lane 1's, ...): the order does not matter to the sums, the coverage does.
  for (std::int64_t i = 0; i < b.rows; ++i) {
    const std::int64_t begin = b.row_ptr[i], n = b.row_ptr[i + 1] - begin, items = n + wide_pair_count(n);
    double z = params[0];
    for (int lane = 0; lane < 32; ++lane)
      for (std::int64_t t = lane; t < items; t += 32) {
        if (t < n) {
          z += params[1 + std::int64_t(b.index[begin + t]) * row_len] * b.value[begin + t];
        } else {
          const WidePair p = wide_pair_of(t - n, n);
          z += wide_ffm_pair_logit(b, k, row_len, params, begin + p.a, begin + p.b);
        }
      }
    logits.push_back(float(z));
    const float g = float(1.0 / (1.0 + std::exp(-z))) - b.label[i];
    grad[0] += g;
    for (std::int64_t t = 0; t < items; ++t) {
      if (t < n) {
        grad[std::size_t(1 + std::int64_t(b.index[begin + t]) * row_len)] += g * b.value[begin + t];
      } else {
        const WidePair p = wide_pair_of(t - n, n);
        const std::int64_t a = begin + p.a, o = begin + p.b;
        wide_ffm_pair_scatter(b, k, row_len, params, a, o, g, grad.data() + 1 + std::int64_t(b.index[a]) * row_len,
                              add);
        wide_ffm_pair_scatter(b, k, row_len, params, o, a, g, grad.data() + 1 + std::int64_t(b.index[o]) * row_len,
                              add);
      }
    }
  }
  REQUIRE(ref.grad_scale > 0.1);
  const BatchError err = batch_error(ref, logits, grad);
  CHECK(err.logit < 1e-5);
  CHECK(err.grad < 1e-5);
}
