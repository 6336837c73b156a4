// gemm_bench: the AVX512-BF16 GEMM kernel against OpenBLAS SGEMM (fp32, one thread) on the GEMM
// shapes of moe_train, measured in one run: per shape the median over interleaved repeats of the
// thread CPU time per call (robust to other processes sharing the cores), after a warmup. The
// bound is the core's vdpbf16ps peak, measured with a register-only loop of independent
// vdpbf16ps (no memory traffic), next to the matching fp32 FMA peak. Without AVX512-BF16 it
// prints a SKIPPED line.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "kernels/cpu/gemm_bf16.hpp"

using namespace skew;
using kernels::GemmShape;

namespace {

// Peak flop rates of one core from register-only loops: kChains independent accumulators (more
// than latency x throughput on current cores), so the loop runs at the instruction's throughput.
constexpr int kChains = 24;
constexpr long kPeakIterations = 20'000'000;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
// GCC 12's AVX-512 intrinsics trip -Wuninitialized once inlined (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Flop/s of one instruction kind, run as kChains independent accumulator chains so that
// throughput, not latency, bounds it: `step(acc)` issues one instruction doing `flops` flops.
template <class Step>
double register_peak(Step step, int flops) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const double start = thread_cpu_seconds();
  for (long i = 0; i < kPeakIterations; ++i)
#pragma GCC unroll 24
    for (auto& a : acc) a = step(a);
  const double seconds = thread_cpu_seconds() - start;
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  volatile float sink = _mm512_reduce_add_ps(sum);  // keeps the loop
  (void)sink;
  return double(kPeakIterations) * kChains * flops / seconds;
}
// vdpbf16ps zmm: 16 lanes x 2 products x 2 flops.
double bf16_peak() {
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3f803f80));  // (1, 1)
  const __m512bh y = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x33803380));  // (2^-24, 2^-24)
  return register_peak([&](__m512 a) { return _mm512_dpbf16_ps(a, x, y); }, 64);
}
// vfmadd zmm fp32: 16 lanes x 2 flops.
double fp32_peak() {
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(0x1p-24f);
  return register_peak([&](__m512 a) { return _mm512_fmadd_ps(a, x, y); }, 32);
}
#pragma GCC diagnostic pop
#pragma GCC pop_options

struct Shape {
  std::string name;
  bool trans_a, trans_b;
  int m, n, k;
};

// moe_train's GEMMs (d_model 64, 3 x 64 fused QKV, FFN width 256, vocabulary 256) at `tokens` rows:
// forward, input gradient (dX = dY W^T, trans_b) and weight gradient (dW = X^T dY, trans_a).
std::vector<Shape> token_shapes(int t) {
  std::vector<Shape> shapes = {{"qkv fwd", false, false, t, 192, 64},    {"qkv dX", false, true, t, 64, 192},
                               {"qkv dW", true, false, 64, 192, t},      {"proj fwd", false, false, t, 64, 64},
                               {"proj dX", false, true, t, 64, 64},      {"proj dW", true, false, 64, 64, t},
                               {"ffn_up fwd", false, false, t, 256, 64}, {"ffn_up dX", false, true, t, 64, 256},
                               {"ffn_up dW", true, false, 64, 256, t},   {"ffn_down fwd", false, false, t, 64, 256},
                               {"ffn_down dX", false, true, t, 256, 64}, {"ffn_down dW", true, false, 256, 64, t},
                               {"lm_head fwd", false, true, t, 256, 64}};
  for (auto& s : shapes) s.name.append("@").append(std::to_string(t));
  return shapes;
}

struct Operands {
  std::vector<float> a, b, c;
};

Operands random_operands(const Shape& s) {
  Rng rng(1, 0);
  auto fill = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 2.0f * rng.uniform() - 1.0f;
    return v;
  };
  return {fill(std::size_t(s.m) * s.k), fill(std::size_t(s.k) * s.n), fill(std::size_t(s.m) * s.n)};
}

GemmShape packed_shape(const Shape& s) {
  GemmShape g;
  g.trans_a = s.trans_a;
  g.trans_b = s.trans_b;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.lda = s.trans_a ? s.m : s.k;
  g.ldb = s.trans_b ? s.k : s.n;
  g.ldc = s.n;
  return g;
}

// Median thread CPU seconds per call of `sgemm` and `bf16` over `repeats` interleaved samples,
// each sample long enough (>= 20 ms) for the clock; both warmed up first.
template <class F, class G>
std::pair<double, double> time_pair(F sgemm, G bf16, int repeats) {
  auto calls_for = [](auto fn) {
    for (int w = 0; w < 3; ++w) fn();
    const double start = thread_cpu_seconds();
    fn();
    return std::max(1, int(0.02 / std::max(thread_cpu_seconds() - start, 1e-9)));
  };
  const int sgemm_calls = calls_for(sgemm), bf16_calls = calls_for(bf16);
  auto sample = [](auto fn, int calls) {
    const double start = thread_cpu_seconds();
    for (int i = 0; i < calls; ++i) fn();
    return (thread_cpu_seconds() - start) / calls;
  };
  std::vector<double> ts, tb;
  for (int r = 0; r < repeats; ++r) {
    ts.push_back(sample(sgemm, sgemm_calls));
    tb.push_back(sample(bf16, bf16_calls));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(ts), median(tb)};
}

}  // namespace

int main(int argc, char** argv) {
  Schema schema("gemm_bench",
                "AVX512-BF16 GEMM kernel vs OpenBLAS SGEMM (one thread) on moe_train's GEMM shapes: "
                "GFLOP/s from the median thread CPU time per call, against the measured vdpbf16ps peak.");
  schema.add_string("bench.tokens", "512,2048", "token counts (rows of the activations) to run the moe shapes at");
  schema.add_int("bench.repeats", 7, {1, 1000}, "interleaved timing samples per kernel and shape (medians reported)");
  schema.add_string("bench.csv", "", "CSV output path (empty = none)");
  try {
    const Config c = Config::parse(schema, argc, argv);
    if (c.answer_help_or_print(std::cout, true)) return 0;
    if (!kernels::cpu::has_avx512_bf16()) {
      std::cout << "SKIPPED: this CPU has no AVX512-BF16\n";
      return 0;
    }
    const int repeats = c.get_int_as<int>("bench.repeats");
    std::vector<Shape> shapes;
    for (const auto t : c.get_int_list("bench.tokens")) {
      SKEW_CHECK(t >= 1 && t <= 1 << 20, c.source("bench.tokens")
                                             << ": bench.tokens item " << t << " is not in [1, 1048576]");
      for (auto& s : token_shapes(int(t))) shapes.push_back(s);
    }
    // Attention per head (sequence 64, head width 16): scores Q K^T and the value product.
    shapes.push_back({"attn QK^T", false, true, 64, 64, 16});
    shapes.push_back({"attn PV", false, false, 64, 16, 64});
    shapes.push_back({"square 1024", false, false, 1024, 1024, 1024});

    openblas_set_num_threads(1);
    const double peak_bf16 = bf16_peak(), peak_fp32 = fp32_peak();
    const std::string blas_core = openblas_get_corename();
    std::cout << "OpenBLAS " << openblas_get_config() << ", kernels for core " << blas_core << "\n";
    std::cout << std::fixed << std::setprecision(1) << "one core: vdpbf16ps peak " << peak_bf16 / 1e9
              << " GFLOP/s, fp32 FMA peak " << peak_fp32 / 1e9 << " GFLOP/s (register-only loops)\n";
    std::unique_ptr<CsvWriter> csv;
    if (!c.get_string("bench.csv").empty())
      csv = std::make_unique<CsvWriter>(
          c.get_string("bench.csv"), std::vector<std::string>{"shape", "sgemm_core", "trans_a", "trans_b", "m", "n",
                                                              "k", "sgemm_gflops", "bf16_gflops", "bf16_over_sgemm",
                                                              "bf16_of_peak", "bf16_peak_gflops", "fp32_peak_gflops"});
    std::cout << std::left << std::setw(20) << "shape" << std::right << std::setw(18) << "m x n x k" << std::setw(9)
              << "sgemm" << std::setw(9) << "bf16" << std::setw(8) << "ratio" << std::setw(9) << "of peak"
              << "   (GFLOP/s)\n";
    for (const auto& s : shapes) {
      Operands o = random_operands(s);
      const GemmShape g = packed_shape(s);
      const auto [sgemm_s, bf16_s] = time_pair(
          [&] {
            cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                        s.m, s.n, s.k, 1.0f, o.a.data(), g.lda, o.b.data(), g.ldb, 0.0f, o.c.data(), g.ldc);
          },
          [&] { kernels::cpu::gemm_bf16_avx512(g, 1.0f, o.a.data(), o.b.data(), 0.0f, o.c.data()); }, repeats);
      const double flops = 2.0 * s.m * s.n * s.k;
      const double sgemm_rate = flops / sgemm_s, bf16_rate = flops / bf16_s;
      const std::string dims = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      std::cout << std::left << std::setw(20) << s.name << std::right << std::setw(18) << dims << std::setw(9)
                << std::setprecision(1) << sgemm_rate / 1e9 << std::setw(9) << bf16_rate / 1e9 << std::setw(8)
                << std::setprecision(2) << bf16_rate / sgemm_rate << std::setw(9) << bf16_rate / peak_bf16 << "\n";
      if (csv)
        csv->row({s.name, blas_core, std::to_string(s.trans_a), std::to_string(s.trans_b), std::to_string(s.m),
                  std::to_string(s.n), std::to_string(s.k), csv_number(sgemm_rate / 1e9), csv_number(bf16_rate / 1e9),
                  csv_number(bf16_rate / sgemm_rate), csv_number(bf16_rate / peak_bf16), csv_number(peak_bf16 / 1e9),
                  csv_number(peak_fp32 / 1e9)});
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "gemm_bench: " << e.what() << "\n";
    return 1;
  }
}
