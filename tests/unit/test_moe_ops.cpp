// MoE model building blocks: backward of each op against float64 finite differences, the
// float gate against a float64 reference, and the dispatch index kernels.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "core/rng.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_expert.hpp"
#include "lib/moe/gate.hpp"
#include "lib/moe/ops.hpp"
#include "tests/unit/finite_difference.hpp"

using namespace skew;
using namespace skew::moe;
using skew::test::check_fd;
using skew::test::dot;

namespace {

std::vector<double> randn(std::size_t n, std::uint64_t stream, double scale = 1.0) {
  Rng rng(17, stream);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}
}  // namespace

TEST_CASE("layernorm backward matches finite differences", "[moe]") {
  const int n = 3, d = 5;
  auto x = randn(n * d, 1), g = randn(d, 2), b = randn(d, 3), r = randn(n * d, 4);
  std::vector<double> y(n * d), mean(n), rstd(n), dx(n * d), dg(d, 0.0), db(d, 0.0);
  auto loss = [&] {
    layernorm_forward<double>(n, d, x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data());
    return dot(y, r);
  };
  loss();
  layernorm_backward<double>(n, d, x.data(), g.data(), mean.data(), rstd.data(), r.data(), dx.data(), dg.data(),
                             db.data());
  check_fd(x, dx, loss);
  check_fd(g, dg, loss);
  check_fd(b, db, loss);
}

TEST_CASE("causal attention backward matches finite differences", "[moe]") {
  const int batch = 2, seq = 4, d = 6, heads = 2;
  auto qkv = randn(batch * seq * 3 * d, 5), r = randn(batch * seq * d, 6);
  std::vector<double> out(batch * seq * d), probs(batch * heads * seq * seq), dqkv(qkv.size());
  auto loss = [&] {
    attention_forward<double>(batch, seq, d, heads, qkv.data(), out.data(), probs.data(), Precision::Fp32);
    return dot(out, r);
  };
  loss();
  attention_backward<double>(batch, seq, d, heads, qkv.data(), probs.data(), r.data(), dqkv.data(), Precision::Fp32);
  check_fd(qkv, dqkv, loss);
  // Causality: the first position's output only sees the first value row.
  for (int c = 0; c < 3; ++c) REQUIRE(out[c] == Approx(qkv[2 * d + c]));
}

TEST_CASE("bidirectional attention: forward against a float64 reference, backward against finite differences",
          "[moe][bert]") {
  const int batch = 2, seq = 4, d = 6, heads = 2, hd = d / heads;
  auto qkv = randn(batch * seq * 3 * d, 5), r = randn(batch * seq * d, 6);
  std::vector<double> out(batch * seq * d), probs(batch * heads * seq * seq), dqkv(qkv.size());
  auto loss = [&] {
    attention_forward<double>(batch, seq, d, heads, qkv.data(), out.data(), probs.data(), Precision::Fp32, false);
    return dot(out, r);
  };
  loss();
  // Straight from the definition: every position's softmax runs over all keys of its sequence.
  auto at = [&](int b, int i, int which, int h, int c) { return qkv[(b * seq + i) * 3 * d + which * d + h * hd + c]; };
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i) {
        std::vector<double> score(seq);
        double z = 0;
        for (int j = 0; j < seq; ++j) {
          for (int c = 0; c < hd; ++c) score[j] += at(b, i, 0, h, c) * at(b, j, 1, h, c) / std::sqrt(double(hd));
          z += std::exp(score[j]);
        }
        for (int c = 0; c < hd; ++c) {
          double expected = 0;
          for (int j = 0; j < seq; ++j) expected += std::exp(score[j]) / z * at(b, j, 2, h, c);
          INFO("sequence " << b << " head " << h << " position " << i);
          REQUIRE(out[(b * seq + i) * d + h * hd + c] == Approx(expected).epsilon(1e-12));
        }
        // Not causal: the first position attends to the last.
        if (i == 0) REQUIRE(probs[((b * heads + h) * seq) * seq + seq - 1] > 0);
      }
  attention_backward<double>(batch, seq, d, heads, qkv.data(), probs.data(), r.data(), dqkv.data(), Precision::Fp32,
                             false);
  check_fd(qkv, dqkv, loss);
}

TEST_CASE("linear, gelu and cross-entropy backward match finite differences", "[moe]") {
  const int n = 3, in = 4, out = 5;
  auto x = randn(n * in, 7), w = randn(in * out, 8), b = randn(out, 9);
  std::vector<std::int32_t> targets = {0, 4, 2};
  std::vector<double> pre(n * out), h(n * out), dlogits(n * out), dh(n * out), dx(n * in), dw(in * out, 0.0),
      db(out, 0.0);
  auto loss = [&] {
    linear_forward<double>(n, in, out, x.data(), w.data(), b.data(), pre.data(), Precision::Fp32);
    gelu_forward<double>(h.size(), pre.data(), h.data());
    return cross_entropy<double>(n, out, h.data(), targets.data(), 1.0 / n, dlogits.data());
  };
  loss();
  gelu_backward<double>(h.size(), pre.data(), dlogits.data(), dh.data());
  linear_backward<double>(n, in, out, x.data(), w.data(), dh.data(), dx.data(), dw.data(), db.data(), Precision::Fp32);
  check_fd(x, dx, loss);
  check_fd(w, dw, loss);
  check_fd(b, db, loss);
}

TEST_CASE("bf16 linear layer in float matches its float64 reference on the same operands", "[moe]") {
  const int n = 37, in = 24, out = 19;
  // Float-representable operands, so both precisions round exactly the same values to bf16.
  auto as_float = [](std::vector<double> v) {
    for (auto& x : v) x = static_cast<float>(x);
    return v;
  };
  const auto x = as_float(randn(n * in, 21)), w = as_float(randn(in * out, 22)), b = as_float(randn(out, 23));
  const auto dy = as_float(randn(n * out, 24));
  auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), dyf = to_float(dy);
  std::vector<float> yf(n * out), dxf(n * in), dwf(in * out, 0.f), dbf(out, 0.f);
  linear_forward<float>(n, in, out, xf.data(), wf.data(), bf.data(), yf.data(), Precision::Bf16);
  linear_backward<float>(n, in, out, xf.data(), wf.data(), dyf.data(), dxf.data(), dwf.data(), dbf.data(),
                         Precision::Bf16);
  struct Outputs {
    std::vector<double> y, dx, dw, db;
  };
  auto reference = [&](Precision p) {
    Outputs r{std::vector<double>(n * out), std::vector<double>(n * in), std::vector<double>(in * out, 0.0),
              std::vector<double>(out, 0.0)};
    linear_forward<double>(n, in, out, x.data(), w.data(), b.data(), r.y.data(), p);
    linear_backward<double>(n, in, out, x.data(), w.data(), dy.data(), r.dx.data(), r.dw.data(), r.db.data(), p);
    return r;
  };
  const Outputs want = reference(Precision::Bf16), fp32 = reference(Precision::Fp32);
  // fp32 accumulation over at most n = 37 products of unit-scale values.
  auto check = [](const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& unrounded) {
    double rounding_effect = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      REQUIRE(got[i] == Approx(ref[i]).margin(2e-5).epsilon(1e-5));
      rounding_effect = std::max(rounding_effect, std::abs(ref[i] - unrounded[i]));
    }
    REQUIRE(rounding_effect > 1e-2);  // the inputs really were rounded
  };
  check(yf, want.y, fp32.y);
  check(dxf, want.dx, fp32.dx);
  check(dwf, want.dw, fp32.dw);
}

TEST_CASE("float GELU (vectorised exp, sigmoid form) matches the float64 GELU", "[moe]") {
  // Dense in [-12, 12], plus tiny and huge magnitudes where tanh saturates or is linear.
  std::vector<double> x;
  for (int i = -24000; i <= 24000; ++i) x.push_back(i * 5e-4);
  for (double v : {1e-30, -1e-30, 1e-7, -1e-7, 40.0, -40.0, 1e4, -1e4}) x.push_back(v);
  const auto dy = randn(x.size(), 31);
  std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end()), yf(x.size()), dxf(x.size());
  std::vector<double> xd(xf.begin(), xf.end()), dyd(dyf.begin(), dyf.end()), yd(x.size()), dxd(x.size());
  gelu_forward<float>(xf.size(), xf.data(), yf.data());
  gelu_backward<float>(xf.size(), xf.data(), dyf.data(), dxf.data());
  gelu_forward<double>(xd.size(), xd.data(), yd.data());
  gelu_backward<double>(xd.size(), xd.data(), dyd.data(), dxd.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << xd[i]);
    REQUIRE(yf[i] == Approx(yd[i]).margin(3e-7).epsilon(1e-6));
    REQUIRE(dxf[i] == Approx(dxd[i]).margin(3e-7 * std::abs(dyd[i])).epsilon(1e-6));
  }
}

TEST_CASE("gate backward (top-k weights, balance loss, z-loss, jitter) matches finite differences", "[moe]") {
  for (int k : {1, 2, 3}) {
    GateOptions opt;
    opt.num_experts = 5, opt.top_k = k, opt.aux_weight = 0.3, opt.z_weight = 0.05;
    const int n = 6, d = 4;
    auto x = randn(n * d, 10), wg = randn(d * 5, 11), r = randn(n * k, 12);
    std::vector<double> jitter(n * d);
    Rng rng(3, 3);
    for (auto& j : jitter) j = 0.9 + 0.2 * rng.uniform();
    GateState<double> s;
    auto identity = [](std::vector<double>&) {};
    auto loss = [&] {
      gate_forward<double>(opt, n, d, x.data(), wg.data(), jitter.data(), nullptr, identity, s);
      return dot(std::vector<double>(s.weight.begin(), s.weight.end()), r) + s.aux_loss + s.z_loss;
    };
    loss();
    const auto chosen = s.expert;
    std::vector<double> dx(n * d), dwg(d * 5, 0.0);
    gate_backward<double>(opt, s, wg.data(), r.data(), dx.data(), dwg.data());
    check_fd(x, dx, loss);
    check_fd(wg, dwg, loss);
    loss();
    REQUIRE(s.expert == chosen);  // no top-k flip under the perturbations
  }
}

TEST_CASE("float gate agrees with a float64 reference", "[moe]") {
  GateOptions opt;
  opt.num_experts = 4, opt.top_k = 2, opt.aux_weight = 0.01, opt.z_weight = 0.001;
  const int n = 16, d = 8, E = 4;
  auto xd = randn(n * d, 20), wd = randn(d * E, 21, 0.5);
  std::vector<float> x(xd.begin(), xd.end()), wg(wd.begin(), wd.end());
  GateState<float> s;
  gate_forward<float>(
      opt, n, d, x.data(), wg.data(), nullptr, nullptr, [](std::vector<double>&) {}, s);
  std::vector<double> me(E, 0.0), ce(E, 0.0);
  double z = 0;
  for (int t = 0; t < n; ++t) {
    std::vector<double> logit(E, 0.0), p(E);
    for (int e = 0; e < E; ++e)
      for (int c = 0; c < d; ++c) logit[e] += double(x[t * d + c]) * double(wg[c * E + e]);
    double mx = *std::max_element(logit.begin(), logit.end()), sum = 0;
    for (int e = 0; e < E; ++e) sum += std::exp(logit[e] - mx);
    const double lse = mx + std::log(sum);
    z += lse * lse;
    for (int e = 0; e < E; ++e) p[e] = std::exp(logit[e] - lse), me[e] += p[e] / n;
    std::vector<int> order = {0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    for (int j = 0; j < 2; ++j) {
      REQUIRE(s.expert[t * 2 + j] == order[j]);
      REQUIRE(s.weight[t * 2 + j] == Approx(p[order[j]]).epsilon(1e-5));
      ce[order[j]] += 1.0 / (2 * n);
    }
  }
  double aux = 0;
  for (int e = 0; e < E; ++e) aux += me[e] * ce[e];
  REQUIRE(s.aux_loss == Approx(0.01 * E * aux).epsilon(1e-5));
  REQUIRE(s.z_loss == Approx(0.001 * z / n).epsilon(1e-5));
}

TEST_CASE("dispatch kernels: histogram, scan and stable expert-contiguous permutation", "[moe]") {
  const std::vector<std::int32_t> keys = {2, 0, 2, 1, 0, 2, 3, 1};
  std::vector<std::int64_t> counts(4), offsets(4), pos(keys.size());
  kernels::moe::histogram(Device::Host, keys.data(), 8, 4, counts.data());
  REQUIRE(counts == std::vector<std::int64_t>{2, 2, 3, 1});
  kernels::moe::exclusive_scan(Device::Host, counts.data(), 4, offsets.data());
  REQUIRE(offsets == std::vector<std::int64_t>{0, 2, 4, 7});
  kernels::moe::stable_positions(Device::Host, keys.data(), 8, 4, offsets.data(), pos.data());
  REQUIRE(pos == std::vector<std::int64_t>{4, 0, 5, 2, 1, 6, 7, 3});
  std::vector<float> rows(16), out(16);
  for (int i = 0; i < 16; ++i) rows[i] = static_cast<float>(i) + 0.5f;
  kernels::moe::scatter_rows(Device::Host, rows.data(), pos.data(), 8, 2, out.data());
  for (int i = 0; i < 8; ++i) REQUIRE(out[pos[i] * 2 + 1] == rows[i * 2 + 1]);
}

namespace {
// c's rows of each group g against a float64 product of the bf16-rounded inputs a and bs[g].
void require_grouped_product_of_rounded(const std::vector<std::int64_t>& offsets, int n, int k,
                                        const std::vector<float>& a, const std::vector<std::vector<float>>& bs,
                                        const std::vector<float>& c) {
  auto r = [](float v) { return static_cast<double>(round_to_bf16(v)); };
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    for (std::int64_t i = offsets[g]; i < offsets[g + 1]; ++i)
      for (int j = 0; j < n; ++j) {
        double want = 0;
        for (int p = 0; p < k; ++p) want += r(a[i * k + p]) * r(bs[g][p * n + j]);
        REQUIRE(c[i * n + j] == Approx(want).margin(1e-5));
      }
}
}  // namespace

TEST_CASE("grouped bf16 expert GEMM matches a float64 reference on bf16-rounded inputs", "[moe]") {
  const int n = 5, k = 7;
  const std::vector<std::int64_t> offsets = {0, 3, 3, 8};  // the middle expert receives no rows
  auto ad = randn(8 * k, 30), b0 = randn(k * n, 31), b1 = randn(k * n, 32), b2 = randn(k * n, 33);
  std::vector<float> a(ad.begin(), ad.end());
  std::vector<std::vector<float>> bs = {{b0.begin(), b0.end()}, {b1.begin(), b1.end()}, {b2.begin(), b2.end()}};
  const float* bp[3] = {bs[0].data(), bs[1].data(), bs[2].data()};
  std::vector<float> c(8 * n, 0.f);
  kernels::moe::grouped_gemm_bf16(Device::Host, 3, offsets.data(), n, k, a.data(), bp, c.data());
  require_grouped_product_of_rounded(offsets, n, k, a, bs, c);
}

TEST_CASE("to_bf16_bits rounds to the nearer bf16 neighbour, ties to even, NaN kept", "[moe]") {
  // Reference in double: the two bf16 neighbours of x are its truncation and the next value up
  // (in magnitude); the result must be the nearer one, the even one on a tie.
  std::vector<float> in = {1.0f,
                           1.0f + 1.0f / 256,
                           1.0f + 3.0f / 256,
                           -1.0f - 1.0f / 256,
                           65504.0f,
                           1e-40f,
                           -0.0f,
                           3.4e38f,
                           std::numeric_limits<float>::quiet_NaN()};
  Rng rng(41, 41);
  for (int i = 0; i < 2000; ++i) in.push_back(static_cast<float>(rng.normal() * std::pow(10.0, rng.uniform() * 8 - 4)));
  std::vector<std::uint16_t> out(in.size());
  kernels::moe::to_bf16_bits(Device::Host, in.data(), static_cast<std::int64_t>(in.size()), out.data());
  auto as_float = [](std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return static_cast<double>(f);
  };
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &in[i], 4);
    if (std::isnan(in[i])) {
      REQUIRE(std::isnan(as_float(std::uint32_t(out[i]) << 16)));
      continue;
    }
    const std::uint32_t down = u & 0xffff0000u, up = down + 0x10000u;
    // IEEE rounds as if the exponent were unbounded: past the largest bf16, "up" is 2^128 (which
    // then overflows to infinity).
    const double up_value =
        (up & 0x7f800000u) == 0x7f800000u ? std::copysign(std::ldexp(1.0, 128), in[i]) : as_float(up);
    const double x = in[i], dd = std::abs(x - as_float(down)), du = std::abs(up_value - x);
    const std::uint32_t want = dd < du ? down : du < dd ? up : ((down >> 16) & 1u) ? up : down;
    REQUIRE((std::uint32_t(out[i]) << 16) == want);
  }
}

TEST_CASE("grouped GEMM on bf16 operands matches a float64 reference", "[moe]") {
  const int n = 6, k = 9;
  const std::vector<std::int64_t> offsets = {0, 4, 4, 11};  // the middle expert receives no rows
  auto ad = randn(11 * k, 50), b0 = randn(k * n, 51), b1 = randn(k * n, 52), b2 = randn(k * n, 53);
  std::vector<float> a(ad.begin(), ad.end());
  std::vector<std::vector<float>> bs = {{b0.begin(), b0.end()}, {b1.begin(), b1.end()}, {b2.begin(), b2.end()}};
  std::vector<std::uint16_t> a16(a.size());
  std::vector<std::vector<std::uint16_t>> b16(3, std::vector<std::uint16_t>(std::size_t(k * n)));
  kernels::moe::to_bf16_bits(Device::Host, a.data(), std::int64_t(a.size()), a16.data());
  for (int g = 0; g < 3; ++g) kernels::moe::to_bf16_bits(Device::Host, bs[g].data(), k * n, b16[g].data());
  const std::uint16_t* bp[3] = {b16[0].data(), b16[1].data(), b16[2].data()};
  std::vector<float> c(11 * n, -7.f);
  kernels::moe::grouped_gemm_bf16_operands(Device::Host, 3, offsets.data(), n, k, a16.data(), bp, c.data());
  require_grouped_product_of_rounded(offsets, n, k, a, bs, c);
}
