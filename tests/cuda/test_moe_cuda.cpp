// The CUDA MoE kernels against their CPU twins on the same inputs (skipped without a GPU).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/cuda_check.hpp"
#include "core/rng.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_expert.hpp"
#include "kernels/moe_gate.hpp"
#include "tests/cuda/tensor_transfer.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
namespace km = skew::kernels::moe;
using skew::test::on_gpu;
using skew::test::on_host;

TEST_CASE("CUDA dispatch kernels equal the CPU ones", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int bins = 12, width = 3;
  const std::int64_t n = 1000;
  Rng rng(5, 5);
  std::vector<std::int32_t> keys(n);
  for (auto& k : keys) k = static_cast<std::int32_t>(rng.below(bins));
  std::vector<std::int64_t> counts(bins), offsets(bins), pos(n);
  km::histogram(Device::Host, keys.data(), n, bins, counts.data());
  for (auto& c : counts) c += 2;  // padded blocks: gaps after each bin
  km::exclusive_scan(Device::Host, counts.data(), bins, offsets.data());
  km::stable_positions(Device::Host, keys.data(), n, bins, offsets.data(), pos.data());
  Tensor dkeys = on_gpu(keys), dcounts = Tensor::zeros({bins}, DType::I64, Device::Cuda);
  km::histogram(Device::Cuda, dkeys.data<std::int32_t>(), n, bins, dcounts.data<std::int64_t>());
  auto got_counts = on_host<std::int64_t>(dcounts);
  for (int b = 0; b < bins; ++b) REQUIRE(got_counts[b] + 2 == counts[b]);
  Tensor dpadded = on_gpu(counts), doffsets = Tensor::zeros({bins}, DType::I64, Device::Cuda);
  km::exclusive_scan(Device::Cuda, dpadded.data<std::int64_t>(), bins, doffsets.data<std::int64_t>());
  REQUIRE(on_host<std::int64_t>(doffsets) == offsets);
  Tensor dpos = Tensor::zeros({n}, DType::I64, Device::Cuda);
  km::stable_positions(Device::Cuda, dkeys.data<std::int32_t>(), n, bins, doffsets.data<std::int64_t>(),
                       dpos.data<std::int64_t>());
  REQUIRE(on_host<std::int64_t>(dpos) == pos);
  std::vector<float> rows(n * width);
  for (auto& v : rows) v = rng.normal();
  const std::int64_t total = offsets.back() + counts.back();
  std::vector<float> out(total * width, 0.f);
  km::scatter_rows(Device::Host, rows.data(), pos.data(), n, width, out.data());
  Tensor drows = on_gpu(rows), dout = Tensor::zeros({total * width}, DType::F32, Device::Cuda);
  km::scatter_rows(Device::Cuda, drows.data<float>(), dpos.data<std::int64_t>(), n, width, dout.data<float>());
  REQUIRE(on_host<float>(dout) == out);
}

TEST_CASE("CUDA gate softmax/top-k equals the CPU one", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int n = 300, E = 8, k = 2;
  Rng rng(6, 6);
  std::vector<float> logits(n * E), probs(n * E), lse(n), weight(n * k);
  std::vector<std::int32_t> expert(n * k);
  for (auto& v : logits) v = 2 * rng.normal();
  km::softmax_topk(Device::Host, n, E, k, logits.data(), probs.data(), lse.data(), expert.data(), weight.data());
  Tensor dl = on_gpu(logits), dp = Tensor::zeros({n * E}, DType::F32, Device::Cuda),
         dlse = Tensor::zeros({n}, DType::F32, Device::Cuda);
  Tensor de = Tensor::zeros({n * k}, DType::I32, Device::Cuda), dw = Tensor::zeros({n * k}, DType::F32, Device::Cuda);
  km::softmax_topk(Device::Cuda, n, E, k, dl.data<float>(), dp.data<float>(), dlse.data<float>(),
                   de.data<std::int32_t>(), dw.data<float>());
  REQUIRE(on_host<std::int32_t>(de) == expert);
  const auto w = on_host<float>(dw), p = on_host<float>(dp);
  for (int i = 0; i < n * k; ++i) REQUIRE(w[i] == Approx(weight[i]).epsilon(1e-5));
  for (int i = 0; i < n * E; ++i) REQUIRE(p[i] == Approx(probs[i]).epsilon(1e-5).margin(1e-7));
}

TEST_CASE("CUDA grouped bf16 GEMM (cublasGemmEx) equals the CPU twin", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int n = 24, k = 16;
  const std::vector<std::int64_t> offsets = {0, 40, 40, 100};
  Rng rng(7, 7);
  std::vector<float> a(100 * k);
  for (auto& v : a) v = rng.normal();
  std::vector<std::vector<float>> b(3, std::vector<float>(k * n));
  for (auto& m : b)
    for (auto& v : m) v = rng.normal();
  const float* hb[3] = {b[0].data(), b[1].data(), b[2].data()};
  std::vector<float> want(100 * n);
  km::grouped_gemm_bf16(Device::Host, 3, offsets.data(), n, k, a.data(), hb, want.data());
  Tensor da = on_gpu(a), db0 = on_gpu(b[0]), db1 = on_gpu(b[1]), db2 = on_gpu(b[2]);
  Tensor dc = Tensor::zeros({100 * n}, DType::F32, Device::Cuda);
  const float* dbp[3] = {db0.data<float>(), db1.data<float>(), db2.data<float>()};
  km::grouped_gemm_bf16(Device::Cuda, 3, offsets.data(), n, k, da.data<float>(), dbp, dc.data<float>());
  const auto got = on_host<float>(dc);
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-3));
}

TEST_CASE("CUDA bf16 rounding and bf16-operand grouped GEMM equal the CPU twins", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int n = 40, k = 24;
  const std::vector<std::int64_t> offsets = {0, 70, 70, 130, 131};  // an empty and a one-row expert
  Rng rng(8, 8);
  std::vector<float> a(131 * k);
  for (auto& v : a) v = 3 * rng.normal();
  a[5] = std::numeric_limits<float>::quiet_NaN();  // rounds to NaN on both sides, bit for bit
  std::vector<std::uint16_t> a16(a.size());
  km::to_bf16_bits(Device::Host, a.data(), std::int64_t(a.size()), a16.data());
  Tensor da = on_gpu(a), da16 = Tensor::zeros({std::int64_t(a.size())}, DType::BF16, Device::Cuda);
  auto* da16_bits = static_cast<std::uint16_t*>(da16.raw());
  km::to_bf16_bits(Device::Cuda, da.data<float>(), std::int64_t(a.size()), da16_bits);
  std::vector<std::uint16_t> got16(a.size());
  SKEW_CUDA_CHECK(cudaMemcpy(got16.data(), da16_bits, got16.size() * 2, cudaMemcpyDeviceToHost));
  REQUIRE(got16 == a16);
  a16[5] = 0, a[5] = 0;  // keep the GEMM finite
  SKEW_CUDA_CHECK(cudaMemcpy(da16_bits, a16.data(), a16.size() * 2, cudaMemcpyHostToDevice));
  std::vector<std::vector<std::uint16_t>> b16(4, std::vector<std::uint16_t>(std::size_t(k * n)));
  std::vector<Tensor> db;
  std::vector<const std::uint16_t*> hb, dbp;
  for (auto& m : b16) {
    std::vector<float> b(std::size_t(k * n));
    for (auto& v : b) v = rng.normal();
    km::to_bf16_bits(Device::Host, b.data(), k * n, m.data());
    hb.push_back(m.data());
    db.push_back(Tensor::zeros({k * n}, DType::BF16, Device::Cuda));
    SKEW_CUDA_CHECK(cudaMemcpy(db.back().raw(), m.data(), m.size() * 2, cudaMemcpyHostToDevice));
    dbp.push_back(static_cast<const std::uint16_t*>(db.back().raw()));
  }
  std::vector<float> want(131 * n);
  km::grouped_gemm_bf16_operands(Device::Host, 4, offsets.data(), n, k, a16.data(), hb.data(), want.data());
  Tensor dc = Tensor::zeros({131 * n}, DType::F32, Device::Cuda);
  km::grouped_gemm_bf16_operands(Device::Cuda, 4, offsets.data(), n, k, da16_bits, dbp.data(), dc.data<float>());
  const auto got = on_host<float>(dc);
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-4).margin(1e-3));
}

TEST_CASE("CUDA grouped expert GEMMs (rows with transposed weights and beta, weight gradients) equal the CPU twins",
          "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const int n = 33, k = 19, groups = 3;
  const std::vector<std::int64_t> offsets = {0, 45, 45, 77};  // an expert with no rows
  Rng rng(9, 9);
  const auto random = [&](std::size_t count) {
    std::vector<float> v(count);
    for (auto& x : v) x = static_cast<float>(rng.normal());
    return v;
  };
  const std::vector<float> a = random(77 * k), c0 = random(77 * n), dy = random(77 * n);
  std::vector<std::vector<float>> w;
  std::vector<Tensor> dw;
  std::vector<const float*> hw, dwp;
  for (int g = 0; g < groups; ++g) {
    w.push_back(random(std::size_t(k) * n));
    dw.push_back(on_gpu(w.back()));
    hw.push_back(w.back().data());
    dwp.push_back(dw.back().data<float>());
  }
  Tensor da = on_gpu(a), ddy = on_gpu(dy);
  for (bool trans_b : {false, true}) {
    std::vector<float> want = c0;
    km::grouped_gemm(Device::Host, groups, offsets.data(), trans_b, n, k, a.data(), hw.data(), 1.f, want.data());
    Tensor dc = on_gpu(c0);
    km::grouped_gemm(Device::Cuda, groups, offsets.data(), trans_b, n, k, da.data<float>(), dwp.data(), 1.f,
                     dc.data<float>());
    const auto got = on_host<float>(dc);
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-4).margin(1e-4));
    // The bf16-operand form, transposed weight and beta = 1 as the layer's backward and forward use it.
    std::vector<std::uint16_t> a16(a.size());
    km::to_bf16_bits(Device::Host, a.data(), std::int64_t(a.size()), a16.data());
    std::vector<std::vector<std::uint16_t>> w16(groups, std::vector<std::uint16_t>(std::size_t(k) * n));
    std::vector<Tensor> dw16;
    std::vector<const std::uint16_t*> hw16, dw16p;
    for (int g = 0; g < groups; ++g) {
      km::to_bf16_bits(Device::Host, w[g].data(), std::int64_t(k) * n, w16[g].data());
      hw16.push_back(w16[g].data());
      dw16.push_back(Tensor::zeros({std::int64_t(k) * n}, DType::BF16, Device::Cuda));
      km::to_bf16_bits(Device::Cuda, dwp[g], std::int64_t(k) * n, static_cast<std::uint16_t*>(dw16.back().raw()));
      dw16p.push_back(static_cast<const std::uint16_t*>(dw16.back().raw()));
    }
    Tensor da16 = Tensor::zeros({std::int64_t(a.size())}, DType::BF16, Device::Cuda);
    km::to_bf16_bits(Device::Cuda, da.data<float>(), std::int64_t(a.size()), static_cast<std::uint16_t*>(da16.raw()));
    want = c0;
    km::grouped_gemm_bf16_operands(Device::Host, groups, offsets.data(), trans_b, n, k, a16.data(), hw16.data(), 1.f,
                                   want.data());
    dc = on_gpu(c0);
    km::grouped_gemm_bf16_operands(Device::Cuda, groups, offsets.data(), trans_b, n, k,
                                   static_cast<const std::uint16_t*>(da16.raw()), dw16p.data(), 1.f, dc.data<float>());
    const auto got16 = on_host<float>(dc);
    for (std::size_t i = 0; i < got16.size(); ++i) REQUIRE(got16[i] == Approx(want[i]).epsilon(1e-4).margin(1e-3));
  }
  for (bool bf16 : {false, true}) {
    // dW[g] [k, n] += a_g^T dy_g
    std::vector<std::vector<float>> want = w;
    std::vector<float*> hg;
    for (auto& m : want) hg.push_back(m.data());
    km::grouped_gemm_weight_grads(Device::Host, bf16, groups, offsets.data(), k, n, a.data(), dy.data(), hg.data());
    std::vector<Tensor> dg;
    std::vector<float*> dgp;
    for (int g = 0; g < groups; ++g) {
      dg.push_back(on_gpu(w[g]));
      dgp.push_back(dg.back().data<float>());
    }
    km::grouped_gemm_weight_grads(Device::Cuda, bf16, groups, offsets.data(), k, n, da.data<float>(), ddy.data<float>(),
                                  dgp.data());
    for (int g = 0; g < groups; ++g) {
      const auto got = on_host<float>(dg[g]);
      for (std::size_t i = 0; i < got.size(); ++i)
        REQUIRE(got[i] == Approx(want[g][i]).epsilon(1e-4).margin(bf16 ? 1e-3 : 1e-4));
    }
  }
}

TEST_CASE("CUDA dispatch equals the CPU twin across sizes, row widths and repeated calls", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  // Sizes shrink and grow between calls, so the grow-only scratch is reused and regrown; widths
  // 64 and 1024 take the float4 path, 3 and 130 the scalar one.
  const std::vector<std::pair<std::int64_t, int>> cases = {{5000, 64}, {17, 3}, {70000, 130}, {3000, 1024}, {1, 4}};
  Rng rng(9, 9);
  for (const auto& [n, width] : cases) {
    const int bins = 37;
    std::vector<std::int32_t> keys(static_cast<std::size_t>(n));
    for (auto& key : keys) key = static_cast<std::int32_t>(rng.below(bins) * rng.below(2));  // bin 0 is hot
    std::vector<float> rows(static_cast<std::size_t>(n) * width);
    for (auto& v : rows) v = rng.normal();
    std::vector<std::int64_t> counts(bins), starts(bins), pos(static_cast<std::size_t>(n));
    km::histogram(Device::Host, keys.data(), n, bins, counts.data());
    km::exclusive_scan(Device::Host, counts.data(), bins, starts.data());
    km::stable_positions(Device::Host, keys.data(), n, bins, starts.data(), pos.data());
    std::vector<float> want(rows.size());
    km::scatter_rows(Device::Host, rows.data(), pos.data(), n, width, want.data());
    Tensor dk = on_gpu(keys), dr = on_gpu(rows), dcounts = Tensor::zeros({bins}, DType::I64, Device::Cuda),
           dstarts = Tensor::zeros({bins}, DType::I64, Device::Cuda),
           dpos = Tensor::zeros({n}, DType::I64, Device::Cuda),
           dout = Tensor::zeros({n * width}, DType::F32, Device::Cuda);
    km::histogram(Device::Cuda, dk.data<std::int32_t>(), n, bins, dcounts.data<std::int64_t>());
    km::exclusive_scan(Device::Cuda, dcounts.data<std::int64_t>(), bins, dstarts.data<std::int64_t>());
    km::stable_positions(Device::Cuda, dk.data<std::int32_t>(), n, bins, dstarts.data<std::int64_t>(),
                         dpos.data<std::int64_t>());
    km::scatter_rows(Device::Cuda, dr.data<float>(), dpos.data<std::int64_t>(), n, width, dout.data<float>());
    REQUIRE(on_host<std::int64_t>(dcounts) == counts);
    REQUIRE(on_host<std::int64_t>(dpos) == pos);
    REQUIRE(on_host<float>(dout) == want);
  }
}

TEST_CASE("CUDA GELU and AdamW run the CPU twins' per-element bodies", "[moe][cuda]") {
  SKEW_REQUIRE_GPU();
  const std::size_t n = 100003;  // not a multiple of the block
  Rng rng(10, 10);
  std::vector<float> x(n), dy(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = 4 * rng.normal(), dy[i] = rng.normal();
  x[0] = 60.f, x[1] = -60.f, x[2] = 0.f;  // saturated on both sides, and zero
  std::vector<float> y(n), dx(n);
  km::gelu_forward(Device::Host, n, x.data(), y.data());
  km::gelu_backward(Device::Host, n, x.data(), dy.data(), dx.data());
  Tensor dx_in = on_gpu(x), ddy = on_gpu(dy), dyo = Tensor::zeros({std::int64_t(n)}, DType::F32, Device::Cuda),
         ddx = Tensor::zeros({std::int64_t(n)}, DType::F32, Device::Cuda);
  km::gelu_forward(Device::Cuda, n, dx_in.data<float>(), dyo.data<float>());
  km::gelu_backward(Device::Cuda, n, dx_in.data<float>(), ddy.data<float>(), ddx.data<float>());
  const auto gy = on_host<float>(dyo), gdx = on_host<float>(ddx);
  // nvcc may contract a * b + c into one fused multiply-add where GCC rounds twice: last bits only.
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(gy[i] == Approx(y[i]).epsilon(1e-5).margin(1e-6));
    REQUIRE(gdx[i] == Approx(dx[i]).epsilon(1e-5).margin(1e-6));
  }

  // Five AdamW steps on the same state; decay on the first half only (begin/end offsets).
  std::vector<float> w(n), m(n, 0.f), v(n, 0.f), g(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = rng.normal();
  Tensor dw = on_gpu(w), dm = on_gpu(m), dv = on_gpu(v), dg = on_gpu(g);
  for (int step = 1; step <= 5; ++step) {
    for (auto& gi : g) gi = rng.normal();
    dg = on_gpu(g);
    const float c1 = 1 - std::pow(0.9f, float(step)), c2 = 1 - std::pow(0.95f, float(step));
    const km::AdamWStep k{0.5f, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1 / c1, 1 / std::sqrt(c2)};
    km::adamw_update(Device::Host, w.data(), g.data(), m.data(), v.data(), 0, n / 2, true, k);
    km::adamw_update(Device::Host, w.data(), g.data(), m.data(), v.data(), n / 2, n, false, k);
    km::adamw_update(Device::Cuda, dw.data<float>(), dg.data<float>(), dm.data<float>(), dv.data<float>(), 0, n / 2,
                     true, k);
    km::adamw_update(Device::Cuda, dw.data<float>(), dg.data<float>(), dm.data<float>(), dv.data<float>(), n / 2, n,
                     false, k);
  }
  const auto gw = on_host<float>(dw), gm = on_host<float>(dm), gv = on_host<float>(dv);
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(gw[i] == Approx(w[i]).epsilon(1e-5).margin(1e-6));
    REQUIRE(gm[i] == Approx(m[i]).epsilon(1e-5).margin(1e-7));
    REQUIRE(gv[i] == Approx(v[i]).epsilon(1e-5).margin(1e-7));
  }
}
