// Swin's layers (lib/moe/models/swin_ops.hpp) against float64 references written out here on small
// random inputs of odd sizes: patch embedding against the direct convolution, window partition and
// cyclic shift against torch.roll semantics, the shifted-window mask against a construction from
// the tokens' unshifted coordinates, window attention with relative position bias against a
// direct loop, patch merging; every backward against central finite differences. The data
// movement runs kernels/moe_swin.hpp's CPU twins (the bodies their CUDA twins run, compared in
// tests/cuda/test_moe_swin_cuda.cpp); their float instantiations move exactly what the float64
// ones do, and the relative position bias's gather and backward match index-table loops.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "core/rng.hpp"
#include "lib/moe/models/swin_ops.hpp"
#include "tests/unit/finite_difference.hpp"

using namespace skew;
using namespace skew::moe;
using skew::test::check_fd;
using skew::test::dot;

namespace {

std::vector<double> randn(std::size_t n, std::uint64_t stream, double scale = 1.0) {
  Rng rng(29, stream);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}
}  // namespace

TEST_CASE("patch embedding as a linear over patches equals the strided convolution", "[moe][swin]") {
  const int B = 2, H = 6, W = 9, Cin = 2, P = 3, C = 5, K = P * P * Cin, L = (H / P) * (W / P);
  std::vector<double> img = randn(static_cast<std::size_t>(B) * H * W * Cin, 1), w = randn(K * C, 2),
                      bias = randn(C, 3), patches(static_cast<std::size_t>(B) * L * K), y(B * L * C);
  patchify<double>(Device::Host, B, H, W, Cin, P, img.data(), patches.data());
  linear_forward<double>(B * L, K, C, patches.data(), w.data(), bias.data(), y.data(), Precision::Fp32);
  // conv weight[o, c, r, s] is w[(r * P + s) * Cin + c, o].
  for (int b = 0; b < B; ++b)
    for (int py = 0; py < H / P; ++py)
      for (int px = 0; px < W / P; ++px)
        for (int o = 0; o < C; ++o) {
          double conv = bias[o];
          for (int r = 0; r < P; ++r)
            for (int s = 0; s < P; ++s)
              for (int c = 0; c < Cin; ++c)
                conv += img[((b * H + py * P + r) * W + px * P + s) * Cin + c] * w[((r * P + s) * Cin + c) * C + o];
          REQUIRE(y[((b * L) + py * (W / P) + px) * C + o] == Approx(conv).epsilon(1e-12));
        }
  // Backward into the embedding's weights and bias (the pixels need none).
  const std::vector<double> dy = randn(y.size(), 4);
  std::vector<double> dw(w.size(), 0.0), db(bias.size(), 0.0);
  linear_backward<double>(B * L, K, C, patches.data(), w.data(), dy.data(), nullptr, dw.data(), db.data(),
                          Precision::Fp32);
  const auto loss = [&] {
    patchify<double>(Device::Host, B, H, W, Cin, P, img.data(), patches.data());
    linear_forward<double>(B * L, K, C, patches.data(), w.data(), bias.data(), y.data(), Precision::Fp32);
    return dot(y, dy);
  };
  check_fd(w, dw, loss);
  check_fd(bias, db, loss);
}

TEST_CASE("window partition of the cyclically shifted map follows torch.roll, reverse is its inverse and adjoint",
          "[moe][swin]") {
  const int B = 2, H = 6, W = 9, C = 3, w = 3;
  const std::vector<double> x = randn(static_cast<std::size_t>(B) * H * W * C, 5);
  for (int shift : {0, 1, 2}) {
    INFO("shift " << shift);
    std::vector<double> windows(x.size()), back(x.size());
    window_partition<double>(Device::Host, B, H, W, C, w, shift, x.data(), windows.data());
    // rolled = torch.roll(x, (-shift, -shift), (1, 2)); window (wy, wx) token (r, c) is rolled[wy*w+r, wx*w+c].
    const int across = W / w, per_image = (H / w) * across;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int col = 0; col < W; ++col)
          for (int c = 0; c < C; ++c) {
            const double rolled = x[((b * H + (h + shift) % H) * W + (col + shift) % W) * C + c];
            const int win = b * per_image + (h / w) * across + col / w, token = (h % w) * w + col % w;
            REQUIRE(windows[(win * w * w + token) * C + c] == rolled);
          }
    window_reverse<double>(Device::Host, B, H, W, C, w, shift, windows.data(), back.data());
    REQUIRE(back == x);
    const std::vector<double> y = randn(x.size(), 6);
    window_reverse<double>(Device::Host, B, H, W, C, w, shift, y.data(), back.data());
    REQUIRE(dot(windows, y) == Approx(dot(x, back)).epsilon(1e-12));  // <P x, y> = <x, P^T y>
  }
}

TEST_CASE("the shifted-window mask joins exactly the tokens that are neighbours before the shift", "[moe][swin]") {
  for (const auto& dims : {std::array{6, 9, 3, 1}, std::array{8, 8, 4, 2}, std::array{14, 14, 7, 3}}) {
    // Plain variables, not a structured binding: clang 14 cannot capture those in the lambda below.
    const int H = dims[0], W = dims[1], w = dims[2], shift = dims[3];
    INFO(H << " x " << W << " window " << w << " shift " << shift);
    const std::vector<double> mask = shifted_window_mask<double>(H, W, w, shift);
    const int N = w * w, across = W / w, windows = (H / w) * across;
    REQUIRE(mask.size() == static_cast<std::size_t>(windows) * N * N);
    int masked = 0;
    for (int win = 0; win < windows; ++win)
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) {
          // Unshifted coordinates of the two tokens: attending is allowed iff they lie within one
          // window's span of each other on both axes (not rolled over from the opposite edge).
          const auto source = [&](int t, bool row) {
            const int pos = row ? (win / across) * w + t / w : (win % across) * w + t % w;
            return (pos + shift) % (row ? H : W);
          };
          const bool near =
              std::abs(source(i, true) - source(j, true)) < w && std::abs(source(i, false) - source(j, false)) < w;
          const double m = mask[(static_cast<std::size_t>(win) * N + i) * N + j];
          REQUIRE(m == (near ? 0.0 : -INFINITY));
          masked += near ? 0 : 1;
        }
    REQUIRE(masked > 0);
  }
  for (double m : shifted_window_mask<double>(6, 9, 3, 0)) REQUIRE(m == 0.0);
}

TEST_CASE("relative position index addresses the (2w-1)^2 table by the offset of the two tokens", "[moe][swin]") {
  // Swin's index for a 2 x 2 window.
  REQUIRE(relative_position_index(2) == std::vector<std::int32_t>{4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4});
  const int w = 5, N = w * w;
  const std::vector<std::int32_t> index = relative_position_index(w);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < N; ++k) {
        const bool same_offset = i / w - j / w == k / w - 0 / w && i % w - j % w == k % w;
        if (same_offset) REQUIRE(index[i * N + j] == index[k * N + 0]);
        REQUIRE((index[i * N + j] >= 0 && index[i * N + j] < (2 * w - 1) * (2 * w - 1)));
      }
}

TEST_CASE("window attention with relative position bias and mask against float64 loops and finite differences",
          "[moe][swin]") {
  const int H = 6, W = 9, w = 3, shift = 1, N = w * w, heads = 2, d = 6, hd = d / heads;
  const int mask_windows = (H / w) * (W / w), windows = 2 * mask_windows;  // two images
  std::vector<double> qkv = randn(static_cast<std::size_t>(windows) * N * 3 * d, 7),
                      table = randn(static_cast<std::size_t>(2 * w - 1) * (2 * w - 1) * heads, 8, 0.5);
  const std::vector<double> mask = shifted_window_mask<double>(H, W, w, shift);
  const std::vector<std::int32_t> index = relative_position_index(w);
  std::vector<double> out(static_cast<std::size_t>(windows) * N * d),
      probs(static_cast<std::size_t>(windows) * heads * N * N);
  const auto forward = [&] {
    window_attention_forward<double>(windows, w, d, heads, qkv.data(), table.data(), mask.data(), mask_windows,
                                     out.data(), probs.data(), Precision::Fp32);
  };
  forward();
  for (int win = 0; win < windows; ++win)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < N; ++i) {
        std::vector<double> logit(N);
        double z = 0;
        for (int j = 0; j < N; ++j) {
          double s = 0;
          for (int e = 0; e < hd; ++e)
            s += qkv[(win * N + i) * 3 * d + h * hd + e] * qkv[(win * N + j) * 3 * d + d + h * hd + e];
          logit[j] = s / std::sqrt(double(hd)) + table[index[i * N + j] * heads + h] +
                     mask[((win % mask_windows) * N + i) * N + j];
          z += std::exp(logit[j]);
        }
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int j = 0; j < N; ++j) o += std::exp(logit[j]) / z * qkv[(win * N + j) * 3 * d + 2 * d + h * hd + e];
          REQUIRE(out[(win * N + i) * d + h * hd + e] == Approx(o).epsilon(1e-10).margin(1e-12));
        }
        // Tokens of different regions never attend to each other: their probability is exactly 0.
        for (int j = 0; j < N; ++j)
          if (std::isinf(mask[((win % mask_windows) * N + i) * N + j]))
            REQUIRE(probs[((win * heads + h) * N + i) * N + j] == 0.0);
      }
  const std::vector<double> dout = randn(out.size(), 9);
  std::vector<double> dqkv(qkv.size()), dtable(table.size(), 0.0);
  window_attention_backward<double>(windows, w, d, heads, qkv.data(), probs.data(), dout.data(), dqkv.data(),
                                    dtable.data(), Precision::Fp32);
  const auto loss = [&] { return forward(), dot(out, dout); };
  check_fd(qkv, dqkv, loss);
  check_fd(table, dtable, loss);
}

TEST_CASE(
    "patch merging: 2x2 concat in Swin's order, LayerNorm, linear 4C->2C (with a bias), backward by finite differences",
    "[moe][swin]") {
  const int B = 2, H = 4, W = 6, C = 3, M = (H / 2) * (W / 2), rows = B * M;
  std::vector<double> x = randn(static_cast<std::size_t>(B) * H * W * C, 10), g = randn(4 * C, 11, 0.3),
                      beta = randn(4 * C, 12, 0.3), w = randn(4 * C * 2 * C, 13, 0.5), bias = randn(2 * C, 15);
  for (auto& v : g) v += 1.0;
  std::vector<double> merged(static_cast<std::size_t>(rows) * 4 * C), ln(merged.size()), mean(rows), rstd(rows),
      y(static_cast<std::size_t>(rows) * 2 * C);
  const auto forward = [&] {
    merge_gather<double>(Device::Host, B, H, W, C, x.data(), merged.data());
    layernorm_forward<double>(rows, 4 * C, merged.data(), g.data(), beta.data(), ln.data(), mean.data(), rstd.data());
    linear_forward<double>(rows, 4 * C, 2 * C, ln.data(), w.data(), bias.data(), y.data(), Precision::Fp32);
  };
  forward();
  // x0 = x[0::2, 0::2], x1 = x[1::2, 0::2], x2 = x[0::2, 1::2], x3 = x[1::2, 1::2] (Swin's PatchMerging).
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < H / 2; ++i)
      for (int j = 0; j < W / 2; ++j)
        for (int q = 0; q < 4; ++q)
          for (int c = 0; c < C; ++c)
            REQUIRE(merged[((b * M) + i * (W / 2) + j) * 4 * C + q * C + c] ==
                    x[((b * H + 2 * i + q % 2) * W + 2 * j + q / 2) * C + c]);
  const std::vector<double> dy = randn(y.size(), 14);
  std::vector<double> dln(ln.size()), dmerged(ln.size()), dx(x.size()), dg(g.size(), 0.0), dbeta(g.size(), 0.0),
      dw(w.size(), 0.0), dbias(bias.size(), 0.0);
  linear_backward<double>(rows, 4 * C, 2 * C, ln.data(), w.data(), dy.data(), dln.data(), dw.data(), dbias.data(),
                          Precision::Fp32);
  layernorm_backward<double>(rows, 4 * C, merged.data(), g.data(), mean.data(), rstd.data(), dln.data(), dmerged.data(),
                             dg.data(), dbeta.data());
  merge_scatter<double>(Device::Host, B, H, W, C, dmerged.data(), dx.data());
  const auto loss = [&] { return forward(), dot(y, dy); };
  check_fd(x, dx, loss);
  check_fd(g, dg, loss);
  check_fd(beta, dbeta, loss);
  check_fd(w, dw, loss);
  check_fd(bias, dbias, loss);
}

TEST_CASE("relative position bias: the gather reads the table by the index, the backward sums by offset",
          "[moe][swin]") {
  for (auto [w, heads, windows] : {std::array{3, 2, 7}, std::array{5, 3, 3}}) {
    INFO("window " << w << " heads " << heads << " windows " << windows);
    const int N = w * w, rows = (2 * w - 1) * (2 * w - 1);
    const std::vector<std::int32_t> index = relative_position_index(w);
    const std::vector<double> table = randn(static_cast<std::size_t>(rows) * heads, 16),
                              dlogits = randn(static_cast<std::size_t>(windows) * heads * N * N, 17);
    std::vector<double> bias(static_cast<std::size_t>(heads) * N * N);
    kernels::moe::relative_bias<double>(Device::Host, w, heads, table.data(), bias.data());
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j) REQUIRE(bias[(h * N + i) * N + j] == table[index[i * N + j] * heads + h]);
    // The backward accumulates onto what the table's gradient already holds.
    std::vector<double> dtable = randn(table.size(), 18), want = dtable;
    for (int win = 0; win < windows; ++win)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < N; ++i)
          for (int j = 0; j < N; ++j)
            want[index[i * N + j] * heads + h] += dlogits[((win * heads + h) * N + i) * N + j];
    kernels::moe::relative_bias_backward<double>(Device::Host, windows, w, heads, dlogits.data(), dtable.data());
    for (std::size_t e = 0; e < want.size(); ++e) REQUIRE(dtable[e] == Approx(want[e]).epsilon(1e-12).margin(1e-12));
  }
}

TEST_CASE("the float twins of the Swin data movement move exactly what the float64 ones do", "[moe][swin]") {
  // Odd channels and several images; a map the window and the patch both tile, merged once.
  const int B = 3, H = 10, W = 15, C = 3, w = 5, P = 5;
  const std::vector<double> x = randn(static_cast<std::size_t>(B) * H * W * C, 19);
  const std::vector<float> xf(x.begin(), x.end());
  const auto same = [](const std::vector<float>& f, const std::vector<double>& d) {
    REQUIRE(f.size() == d.size());
    for (std::size_t i = 0; i < d.size(); ++i) REQUIRE(f[i] == static_cast<float>(d[i]));
  };
  std::vector<double> out(x.size()), back(x.size());
  std::vector<float> outf(x.size()), backf(x.size());
  for (int shift : {0, 2, 4}) {
    INFO("shift " << shift);
    kernels::moe::window_partition<double>(Device::Host, B, H, W, C, w, shift, x.data(), out.data());
    kernels::moe::window_partition<float>(Device::Host, B, H, W, C, w, shift, xf.data(), outf.data());
    same(outf, out);
    kernels::moe::window_reverse<float>(Device::Host, B, H, W, C, w, shift, outf.data(), backf.data());
    REQUIRE(backf == xf);
    const std::vector<double> maskd = shifted_window_mask<double>(H, W, w, shift);
    const std::vector<float> maskf = shifted_window_mask<float>(H, W, w, shift);
    for (std::size_t e = 0; e < maskd.size(); ++e) REQUIRE(maskf[e] == static_cast<float>(maskd[e]));
  }
  kernels::moe::patchify<double>(Device::Host, B, H, W, C, P, x.data(), out.data());
  kernels::moe::patchify<float>(Device::Host, B, H, W, C, P, xf.data(), outf.data());
  same(outf, out);
  const int He = 10, We = 14;  // merging needs an even map
  const std::vector<double> y = randn(static_cast<std::size_t>(B) * He * We * C, 20);
  const std::vector<float> yf(y.begin(), y.end());
  std::vector<double> merged(y.size());
  std::vector<float> mergedf(y.size()), yback(y.size());
  kernels::moe::merge_gather<double>(Device::Host, B, He, We, C, y.data(), merged.data());
  kernels::moe::merge_gather<float>(Device::Host, B, He, We, C, yf.data(), mergedf.data());
  same(mergedf, merged);
  kernels::moe::merge_scatter<float>(Device::Host, B, He, We, C, mergedf.data(), yback.data());
  REQUIRE(yback == yf);
  REQUIRE_THROWS_WITH(kernels::moe::window_partition<float>(Device::Host, B, H, W, C, 4, 0, xf.data(), outf.data()),
                      Catch::Contains("window 4 does not tile the 10 x 15 feature map"));
  REQUIRE_THROWS_WITH(kernels::moe::merge_gather<float>(Device::Host, B, H, W, C, xf.data(), outf.data()),
                      Catch::Contains("patch merging needs an even feature map, not 10 x 15"));
}
