// The gate statistics and the combine backward's dweight as fixed-order lane sums
// (kernels/moe_lane_sum.hpp), on sizes past the lane count (each lane adds several terms) and
// sizes not a multiple of it, against float64 sums written here; and the same bits on a rerun.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_gate.hpp"
#include "kernels/moe_lane_sum.hpp"
#include "kernels/moe_route.hpp"

using namespace skew;
namespace km = skew::kernels::moe;

TEST_CASE("gate statistics over more tokens than lanes match float64 column sums", "[moe]") {
  const int n = 3 * km::kSumLanes + 17, experts = 5;
  Rng rng(83, 1);
  std::vector<float> probs(static_cast<std::size_t>(n) * experts), lse(static_cast<std::size_t>(n));
  for (auto& p : probs) p = static_cast<float>(rng.uniform());
  for (auto& l : lse) l = static_cast<float>(rng.normal());
  std::vector<double> want(experts + 1, 0.0);
  for (int t = 0; t < n; ++t) {
    for (int e = 0; e < experts; ++e) want[e] += probs[static_cast<std::size_t>(t) * experts + e];
    want[experts] += static_cast<double>(lse[t]) * lse[t];
  }
  std::vector<double> got(experts + 1), again(experts + 1);
  km::gate_statistics<float>(Device::Host, n, experts, probs.data(), lse.data(), got.data());
  km::gate_statistics<float>(Device::Host, n, experts, probs.data(), lse.data(), again.data());
  for (int j = 0; j <= experts; ++j) REQUIRE(got[j] == Approx(want[j]).epsilon(1e-12));
  REQUIRE(got == again);
}

TEST_CASE("combine backward over rows wider than the lanes matches float64", "[moe]") {
  const int tokens = 9, k = 2, width = km::kSumLanes + 45;
  const std::int64_t assignments = tokens * k, rows = 14;
  Rng rng(83, 2);
  std::vector<std::int64_t> pos(assignments);
  // Rows 0..13 once each in a shuffled order; four assignments dropped (pos >= rows).
  for (std::int64_t a = 0; a < assignments; ++a) pos[a] = (a * 5) % assignments;
  std::vector<float> weight(assignments), dy(static_cast<std::size_t>(tokens) * width),
      back(static_cast<std::size_t>(rows) * width);
  for (auto& w : weight) w = static_cast<float>(rng.uniform());
  for (auto& x : dy) x = static_cast<float>(rng.normal());
  for (auto& x : back) x = static_cast<float>(rng.normal());
  std::vector<float> dsend(static_cast<std::size_t>(rows) * width, 0.f), dweight(assignments, -1.f);
  km::combine_backward<float>(Device::Host, assignments, k, width, pos.data(), rows, weight.data(), dy.data(),
                              back.data(), dsend.data(), dweight.data());
  int dropped = 0;
  for (std::int64_t a = 0; a < assignments; ++a) {
    if (pos[a] >= rows) {
      ++dropped;
      REQUIRE(dweight[a] == 0.f);
      continue;
    }
    double dot = 0;
    for (int c = 0; c < width; ++c) {
      const double g = dy[(a / k) * width + c];
      dot += g * back[pos[a] * width + c];
      REQUIRE(dsend[pos[a] * width + c] == Approx(weight[a] * g).epsilon(1e-6));
    }
    REQUIRE(dweight[a] == Approx(dot).epsilon(1e-5));
  }
  REQUIRE(dropped == 4);
}
