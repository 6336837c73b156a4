// The CUDA row-wise kernels (kernels/cuda/moe_rowwise.cu) against their CPU twins on the same
// inputs, forward and backward, on odd shapes (rows not a multiple of the 8 rows per block,
// columns not of the 32 lanes); fp32 tolerances, as only the summation order (and FMA
// contraction) differs.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_rowwise.hpp"
#include "tests/cuda/tensor_transfer.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
namespace km = skew::kernels::moe;
using skew::test::on_gpu;
using skew::test::on_host;

namespace {
std::vector<float> normal(std::size_t n, std::uint64_t stream, float scale = 1.0f, float offset = 0.0f) {
  Rng rng(41, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + scale * rng.normal();
  return v;
}
std::vector<std::int32_t> below(std::size_t n, int bound, std::uint64_t stream) {
  Rng rng(43, stream);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(bound)));
  return v;
}
void require_close(const std::vector<float>& got, const std::vector<float>& want, double epsilon, double margin) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(epsilon).margin(margin));
  }
}
}  // namespace

TEST_CASE("CUDA layernorm forward and backward equal the CPU twin", "[moe][cuda][rowwise]") {
  SKEW_REQUIRE_GPU();
  const int n = 1037, d = 1030;
  const std::size_t count = static_cast<std::size_t>(n) * d;
  const auto x = normal(count, 1, 2.0f, 3.0f), g = normal(d, 2, 0.5f, 1.0f), b = normal(d, 3), dy = normal(count, 4);
  auto dg = normal(d, 5), db = normal(d, 6);  // accumulated into: start non-zero
  std::vector<float> y(count), mean(n), rstd(n), dx(count);
  km::layernorm_forward(Device::Host, n, d, x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data());
  Tensor gx = on_gpu(x), gg = on_gpu(g), gb = on_gpu(b), gdy = on_gpu(dy), gdg = on_gpu(dg), gdb = on_gpu(db);
  Tensor gy = on_gpu(y), gmean = on_gpu(mean), grstd = on_gpu(rstd), gdx = on_gpu(dx);
  km::layernorm_forward(Device::Cuda, n, d, gx.data<float>(), gg.data<float>(), gb.data<float>(), gy.data<float>(),
                        gmean.data<float>(), grstd.data<float>());
  require_close(on_host<float>(gy), y, 1e-5, 1e-5);
  require_close(on_host<float>(gmean), mean, 1e-6, 1e-6);
  require_close(on_host<float>(grstd), rstd, 1e-5, 0);
  km::layernorm_backward(Device::Host, n, d, x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx.data(),
                         dg.data(), db.data());
  km::layernorm_backward(Device::Cuda, n, d, gx.data<float>(), gg.data<float>(), gmean.data<float>(),
                         grstd.data<float>(), gdy.data<float>(), gdx.data<float>(), gdg.data<float>(),
                         gdb.data<float>());
  require_close(on_host<float>(gdx), dx, 1e-4, 1e-5);
  require_close(on_host<float>(gdg), dg, 1e-4, 1e-4);
  require_close(on_host<float>(gdb), db, 1e-4, 1e-4);
}

TEST_CASE("CUDA embedding forward and backward (atomics) equal the CPU twin", "[moe][cuda][rowwise]") {
  SKEW_REQUIRE_GPU();
  const int n = 1037, d = 130, seq = 100, vocab = 257;
  const auto tokens = below(n, vocab, 7);
  const auto wte = normal(static_cast<std::size_t>(vocab) * d, 8), wpe = normal(static_cast<std::size_t>(seq) * d, 9);
  const auto dout = normal(static_cast<std::size_t>(n) * d, 10);
  auto dwte = normal(wte.size(), 11), dwpe = normal(wpe.size(), 12);
  std::vector<float> out(dout.size());
  km::embedding_forward(Device::Host, n, d, seq, tokens.data(), wte.data(), wpe.data(), out.data());
  Tensor gt = on_gpu(tokens), gwte = on_gpu(wte), gwpe = on_gpu(wpe), gout = on_gpu(out), gdout = on_gpu(dout);
  Tensor gdwte = on_gpu(dwte), gdwpe = on_gpu(dwpe);
  km::embedding_forward(Device::Cuda, n, d, seq, gt.data<std::int32_t>(), gwte.data<float>(), gwpe.data<float>(),
                        gout.data<float>());
  REQUIRE(on_host<float>(gout) == out);  // one addition per element: bit-identical
  km::embedding_backward(Device::Host, n, d, seq, tokens.data(), dout.data(), dwte.data(), dwpe.data());
  km::embedding_backward(Device::Cuda, n, d, seq, gt.data<std::int32_t>(), gdout.data<float>(), gdwte.data<float>(),
                         gdwpe.data<float>());
  require_close(on_host<float>(gdwte), dwte, 1e-5, 1e-5);
  require_close(on_host<float>(gdwpe), dwpe, 1e-5, 1e-5);
}

TEST_CASE("CUDA attention softmax (causal and not) forward and backward equal the CPU twin", "[moe][cuda][rowwise]") {
  SKEW_REQUIRE_GPU();
  const int seq = 517;
  const std::size_t rows = 3 * static_cast<std::size_t>(seq);  // three [seq, seq] blocks
  for (const bool causal : {true, false}) {
    INFO("causal " << causal);
    auto scores = normal(rows * seq, 13, 3.0f);
    auto grad = normal(rows * seq, 14);
    Tensor gscores = on_gpu(scores), ggrad = on_gpu(grad);
    km::attention_softmax_forward(Device::Host, rows, seq, causal, scores.data());
    km::attention_softmax_forward(Device::Cuda, rows, seq, causal, gscores.data<float>());
    const auto probs = on_host<float>(gscores);
    require_close(probs, scores, 1e-5, 1e-7);
    const float scale = 0.125f;
    km::attention_softmax_backward(Device::Host, rows, seq, causal, scores.data(), grad.data(), scale);
    km::attention_softmax_backward(Device::Cuda, rows, seq, causal, gscores.data<float>(), ggrad.data<float>(), scale);
    require_close(on_host<float>(ggrad), grad, 1e-4, 1e-6);
  }
}

TEST_CASE("CUDA cross-entropy equals the CPU twin", "[moe][cuda][rowwise]") {
  SKEW_REQUIRE_GPU();
  const int n = 1037, v = 259;
  const auto logits = normal(static_cast<std::size_t>(n) * v, 15, 3.0f);
  const auto targets = below(n, v, 16);
  const float scale = 1.0f / n;
  std::vector<float> dlogits(logits.size());
  std::vector<double> loss(n);
  km::cross_entropy(Device::Host, n, v, logits.data(), targets.data(), scale, dlogits.data(), loss.data());
  Tensor gl = on_gpu(logits), gt = on_gpu(targets), gdl = on_gpu(dlogits), gloss = on_gpu(loss);
  km::cross_entropy(Device::Cuda, n, v, gl.data<float>(), gt.data<std::int32_t>(), scale, gdl.data<float>(),
                    gloss.data<double>());
  const auto got_loss = on_host<double>(gloss);
  for (int i = 0; i < n; ++i) REQUIRE(got_loss[std::size_t(i)] == Approx(loss[std::size_t(i)]).epsilon(1e-6));
  require_close(on_host<float>(gdl), dlogits, 1e-5, 1e-9);
}

TEST_CASE("CUDA sum of squares equals the CPU twin", "[moe][cuda][rowwise]") {
  SKEW_REQUIRE_GPU();
  for (const std::size_t n : {std::size_t(1), std::size_t(37), 5 * km::kSquaresChunk + 37, std::size_t(3) << 20}) {
    const auto x = normal(n, 17 + n, 0.1f, 0.05f);
    Tensor gx = on_gpu(x);
    INFO("n = " << n);
    REQUIRE(km::sum_of_squares(Device::Cuda, n, gx.data<float>()) ==
            Approx(km::sum_of_squares(Device::Host, n, x.data())).epsilon(1e-6));
  }
  REQUIRE(km::sum_of_squares(Device::Cuda, 0, nullptr) == 0.0);
}
