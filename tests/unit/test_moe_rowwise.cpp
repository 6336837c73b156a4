// The row-wise CPU twins (kernels/moe_rowwise.hpp, reached through lib/moe/ops.hpp's float
// path) against the float64 ops on the same float-representable inputs, forward and backward,
// on odd shapes (37 rows, 130 columns) so that no lane or chunk boundary lines up.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "kernels/moe_rowwise.hpp"
#include "lib/moe/ops.hpp"

using namespace skew;
using namespace skew::moe;

namespace {

// n floats offset + scale * N(0, 1), and the same values as doubles.
struct Pair {
  std::vector<float> f;
  std::vector<double> d;
};
Pair random_pair(std::size_t n, std::uint64_t stream, double scale = 1.0, double offset = 0.0) {
  Rng rng(23, stream);
  Pair p;
  for (std::size_t i = 0; i < n; ++i) p.f.push_back(static_cast<float>(offset + scale * rng.normal()));
  p.d.assign(p.f.begin(), p.f.end());
  return p;
}

// Every fp32 value within `epsilon` relative or `margin` absolute of its float64 reference.
void require_close(const std::vector<float>& got, const std::vector<double>& want, double epsilon, double margin) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(epsilon).margin(margin));
  }
}

std::vector<std::int32_t> random_tokens(std::size_t n, int vocab, std::uint64_t stream) {
  Rng rng(29, stream);
  std::vector<std::int32_t> t(n);
  for (auto& v : t) v = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return t;
}

}  // namespace

TEST_CASE("fp32 layernorm twin matches float64 layernorm forward and backward", "[moe][rowwise]") {
  const int n = 37, d = 130;
  // Rows far from zero mean: the two-pass variance must not cancel.
  auto x = random_pair(static_cast<std::size_t>(n) * d, 1, 2.0, 3.0);
  auto g = random_pair(d, 2, 0.5, 1.0), b = random_pair(d, 3), dy = random_pair(static_cast<std::size_t>(n) * d, 4);
  std::vector<float> yf(x.f.size()), meanf(n), rstdf(n), dxf(x.f.size());
  std::vector<double> yd(x.d.size()), meand(n), rstdd(n), dxd(x.d.size());
  layernorm_forward<float>(n, d, x.f.data(), g.f.data(), b.f.data(), yf.data(), meanf.data(), rstdf.data());
  layernorm_forward<double>(n, d, x.d.data(), g.d.data(), b.d.data(), yd.data(), meand.data(), rstdd.data());
  require_close(yf, yd, 1e-5, 1e-5);
  require_close(meanf, meand, 1e-6, 1e-6);
  require_close(rstdf, rstdd, 1e-5, 0);
  // The parameter gradients accumulate: start them non-zero.
  auto dg = random_pair(d, 5), db = random_pair(d, 6);
  layernorm_backward<float>(n, d, x.f.data(), g.f.data(), meanf.data(), rstdf.data(), dy.f.data(), dxf.data(),
                            dg.f.data(), db.f.data());
  layernorm_backward<double>(n, d, x.d.data(), g.d.data(), meand.data(), rstdd.data(), dy.d.data(), dxd.data(),
                             dg.d.data(), db.d.data());
  require_close(dxf, dxd, 1e-4, 1e-5);
  require_close(dg.f, dg.d, 1e-5, 1e-5);
  require_close(db.f, db.d, 1e-5, 1e-5);
}

TEST_CASE("fp32 embedding twin matches float64 embedding forward and backward", "[moe][rowwise]") {
  // 37 tokens over a vocabulary of 13 and positions modulo 10: rows of both tables repeat.
  const int n = 37, d = 130, seq = 10, vocab = 13;
  const auto tokens = random_tokens(n, vocab, 7);
  auto wte = random_pair(static_cast<std::size_t>(vocab) * d, 8),
       wpe = random_pair(static_cast<std::size_t>(seq) * d, 9);
  std::vector<float> outf(static_cast<std::size_t>(n) * d);
  std::vector<double> outd(outf.size());
  embedding_forward<float>(n, d, seq, tokens.data(), wte.f.data(), wpe.f.data(), outf.data());
  embedding_forward<double>(n, d, seq, tokens.data(), wte.d.data(), wpe.d.data(), outd.data());
  // One fp32 addition, correctly rounded: exactly the float64 sum rounded to fp32.
  for (std::size_t i = 0; i < outf.size(); ++i) REQUIRE(outf[i] == static_cast<float>(outd[i]));
  auto dout = random_pair(outf.size(), 10);
  auto dwte = random_pair(wte.f.size(), 11), dwpe = random_pair(wpe.f.size(), 12);
  embedding_backward<float>(n, d, seq, tokens.data(), dout.f.data(), dwte.f.data(), dwpe.f.data());
  embedding_backward<double>(n, d, seq, tokens.data(), dout.d.data(), dwte.d.data(), dwpe.d.data());
  require_close(dwte.f, dwte.d, 1e-5, 1e-5);
  require_close(dwpe.f, dwpe.d, 1e-5, 1e-5);
}

TEST_CASE("fp32 attention (softmax twin), causal and bidirectional, matches float64 forward and backward",
          "[moe][rowwise]") {
  const int batch = 2, seq = 37, d = 130, heads = 5;
  auto qkv = random_pair(static_cast<std::size_t>(batch) * seq * 3 * d, 13);
  auto dout = random_pair(static_cast<std::size_t>(batch) * seq * d, 14);
  const std::size_t prob_count = static_cast<std::size_t>(batch) * heads * seq * seq;
  for (const bool causal : {true, false}) {
    INFO("causal " << causal);
    std::vector<float> outf(dout.f.size()), probsf(prob_count), dqkvf(qkv.f.size());
    std::vector<double> outd(dout.d.size()), probsd(prob_count), dqkvd(qkv.d.size());
    attention_forward<float>(batch, seq, d, heads, qkv.f.data(), outf.data(), probsf.data(), Precision::Fp32, causal);
    attention_forward<double>(batch, seq, d, heads, qkv.d.data(), outd.data(), probsd.data(), Precision::Fp32, causal);
    require_close(probsf, probsd, 1e-4, 1e-6);
    // Above the diagonal: nothing under the causal mask, every entry positive without it.
    for (int bh = 0; bh < batch * heads; ++bh)
      for (int i = 0; i < seq; ++i)
        for (int j = i + 1; j < seq; ++j) {
          const float p = probsf[(static_cast<std::size_t>(bh) * seq + i) * seq + j];
          if (causal)
            REQUIRE(p == 0.0f);
          else
            REQUIRE(p > 0.0f);
        }
    require_close(outf, outd, 1e-4, 1e-5);
    attention_backward<float>(batch, seq, d, heads, qkv.f.data(), probsf.data(), dout.f.data(), dqkvf.data(),
                              Precision::Fp32, causal);
    attention_backward<double>(batch, seq, d, heads, qkv.d.data(), probsd.data(), dout.d.data(), dqkvd.data(),
                               Precision::Fp32, causal);
    require_close(dqkvf, dqkvd, 1e-3, 1e-4);
  }
}

TEST_CASE("fp32 cross-entropy twin matches float64 cross-entropy", "[moe][rowwise]") {
  const int n = 37, v = 259;
  auto logits = random_pair(static_cast<std::size_t>(n) * v, 15, 3.0);
  const auto targets = random_tokens(n, v, 16);
  const double scale = 1.0 / 37;
  std::vector<float> dlf(logits.f.size());
  std::vector<double> dld(logits.d.size());
  const double loss_f =
      cross_entropy<float>(n, v, logits.f.data(), targets.data(), static_cast<float>(scale), dlf.data());
  const double loss_d = cross_entropy<double>(n, v, logits.d.data(), targets.data(), scale, dld.data());
  REQUIRE(loss_d > 1.0);  // non-trivial: far from a confident model
  REQUIRE(loss_f == Approx(loss_d).epsilon(1e-6));
  require_close(dlf, dld, 1e-5, 1e-8);
}

TEST_CASE("fp32 sum of squares (two-level) matches float64, and the clip scale", "[moe][rowwise]") {
  // Three full chunks and a ragged one.
  const std::size_t n = 3 * kernels::moe::kSquaresChunk + 37;
  auto x = random_pair(n, 17, 0.1, 0.05);
  const double got = sum_of_squares<float>(n, x.f.data());
  const double want = sum_of_squares<double>(n, x.d.data());
  REQUIRE(got == Approx(want).epsilon(1e-6));
  REQUIRE(sum_of_squares<float>(0, x.f.data()) == 0.0);
  REQUIRE(kernels::moe::grad_clip_scale(5.0, 1.0) == 0.2f);
  REQUIRE(kernels::moe::grad_clip_scale(0.5, 1.0) == 1.0f);
  REQUIRE(kernels::moe::grad_clip_scale(5.0, 0.0) == 1.0f);  // 0: clipping off
}
