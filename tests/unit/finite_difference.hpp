// Float64 gradient checks shared by the MoE layer tests (ops, Swin's layers).
#pragma once
#include <catch2/catch.hpp>
#include <functional>
#include <vector>

namespace skew::test {

// loss(values) must be a smooth function; checks grad[i] == d loss / d values[i] for all i by
// central differences.
inline void check_fd(std::vector<double>& values, const std::vector<double>& grad,
                     const std::function<double()>& loss) {
  REQUIRE(values.size() == grad.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double keep = values[i];
    values[i] = keep + 1e-6;
    const double up = loss();
    values[i] = keep - 1e-6;
    const double down = loss();
    values[i] = keep;
    INFO("index " << i);
    REQUIRE((up - down) / 2e-6 == Approx(grad[i]).margin(1e-8).epsilon(1e-6));
  }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace skew::test
