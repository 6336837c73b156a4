// The expert step the start-up calibration times (lib/placement/expert_step.hpp) does an expert's
// whole forward and backward: its outputs and gradients against a float64 loop of the FFN and its
// derivatives (tanh GELU, differentiated by hand), on a small block with every dimension distinct.
#include <catch2/catch.hpp>
#include <cmath>

#include "lib/placement/expert_step.hpp"

using namespace skew;
using namespace skew::placement;

namespace {

double gelu(double v) {
  const double c = std::sqrt(2.0 / M_PI), u = c * (v + 0.044715 * v * v * v);
  return 0.5 * v * (1.0 + std::tanh(u));
}

double gelu_derivative(double v) {
  const double c = std::sqrt(2.0 / M_PI), u = c * (v + 0.044715 * v * v * v), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "]");
    CHECK(got[i] == Approx(want[i]).margin(1e-5).epsilon(1e-4));
  }
}

}  // namespace

TEST_CASE("expert step: forward, backward and weight gradients of the FFN", "[placement][cost]") {
  const int R = 5, D = 3, F = 4;
  ExpertStep step(R, D, F, Device::Host, 11);
  step.run();
  step.run();  // the weight gradients accumulate over calls, the rows do not
  const ExpertStep::Values v = step.values();
  std::vector<double> y(R * D), dx(R * D), dw1(D * F, 0.0), db1(F, 0.0), dw2(F * D, 0.0), db2(D, 0.0);
  for (int r = 0; r < R; ++r) {
    std::vector<double> pre(F), h(F), dh(F);
    for (int f = 0; f < F; ++f) {
      pre[f] = v.b1[f];
      for (int d = 0; d < D; ++d) pre[f] += double(v.x[r * D + d]) * v.w1[d * F + f];
      h[f] = gelu(pre[f]);
    }
    for (int d = 0; d < D; ++d) {
      y[r * D + d] = v.b2[d];
      for (int f = 0; f < F; ++f) y[r * D + d] += h[f] * v.w2[f * D + d];
    }
    for (int f = 0; f < F; ++f) {
      double g = 0;
      for (int d = 0; d < D; ++d) g += double(v.dy[r * D + d]) * v.w2[f * D + d];
      dh[f] = g * gelu_derivative(pre[f]);
    }
    for (int d = 0; d < D; ++d) {
      dx[r * D + d] = 0;
      for (int f = 0; f < F; ++f) dx[r * D + d] += dh[f] * v.w1[d * F + f];
    }
    for (int f = 0; f < F; ++f) {
      db1[f] += 2 * dh[f];
      for (int d = 0; d < D; ++d) {
        dw1[d * F + f] += 2 * double(v.x[r * D + d]) * dh[f];
        dw2[f * D + d] += 2 * h[f] * v.dy[r * D + d];
      }
    }
    for (int d = 0; d < D; ++d) db2[d] += 2.0 * v.dy[r * D + d];
  }
  check_close(v.y, y, "y");
  check_close(v.dx, dx, "dx");
  check_close(v.dw1, dw1, "dW1");
  check_close(v.db1, db1, "db1");
  check_close(v.dw2, dw2, "dW2");
  check_close(v.db2, db2, "db2");
  // Not a degenerate case: GELU's curvature matters on these inputs (some pre-activations negative).
  double smallest = 0;
  for (float g : v.dw1) smallest = std::min(smallest, double(g));
  CHECK(smallest < 0);
}
