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
#include <string>
#include <vector>

#include "apps/bench/harness.hpp"
#include "apps/bench/machine.hpp"
#include "apps/bench/table.hpp"
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
  GemmShape gemm;  // leading dimensions packed (the natural row strides), as the kernel requires
};

// A `name`d product op(A) op(B) of m x k by k x n with packed leading dimensions.
Shape packed_shape(std::string name, bool trans_a, bool trans_b, int m, int n, int k) {
  return {std::move(name), {trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, n}};
}

// moe_train's GEMMs (d_model 64, 3 x 64 fused QKV, FFN width 256, vocabulary 256) at `tokens` rows:
// forward, input gradient (dX = dY W^T, trans_b) and weight gradient (dW = X^T dY, trans_a).
std::vector<Shape> token_shapes(int t) {
  std::vector<Shape> shapes = {
      packed_shape("qkv fwd", false, false, t, 192, 64),    packed_shape("qkv dX", false, true, t, 64, 192),
      packed_shape("qkv dW", true, false, 64, 192, t),      packed_shape("proj fwd", false, false, t, 64, 64),
      packed_shape("proj dX", false, true, t, 64, 64),      packed_shape("proj dW", true, false, 64, 64, t),
      packed_shape("ffn_up fwd", false, false, t, 256, 64), packed_shape("ffn_up dX", false, true, t, 64, 256),
      packed_shape("ffn_up dW", true, false, 64, 256, t),   packed_shape("ffn_down fwd", false, false, t, 64, 256),
      packed_shape("ffn_down dX", false, true, t, 256, 64), packed_shape("ffn_down dW", true, false, 256, 64, t),
      packed_shape("lm_head fwd", false, true, t, 256, 64)};
  for (auto& s : shapes) s.name.append("@").append(std::to_string(t));
  return shapes;
}

struct Operands {
  std::vector<float> a, b, c;
};

Operands random_operands(const GemmShape& s) {
  Rng rng(1, 0);
  auto fill = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 2.0f * rng.uniform() - 1.0f;
    return v;
  };
  return {fill(std::size_t(s.m) * s.k), fill(std::size_t(s.k) * s.n), fill(std::size_t(s.m) * s.n)};
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
  return {bench::median(ts), bench::median(tb)};
}

struct Options {
  std::vector<Shape> shapes;  // bench.tokens' moe shapes, then attention's and a square one
  int repeats;
  std::string csv;
};

Schema make_schema() {
  Schema schema("gemm_bench",
                "AVX512-BF16 GEMM kernel vs OpenBLAS SGEMM (one thread) on moe_train's GEMM shapes: "
                "GFLOP/s from the median thread CPU time per call, against the measured vdpbf16ps peak.");
  schema.add_int_list("bench.tokens", "512,2048", {1, 1 << 20},
                      "token counts (rows of the activations) to run the moe shapes at");
  schema.add_int("bench.repeats", 7, {1, 1000}, "interleaved timing samples per kernel and shape (medians reported)");
  schema.add_string("bench.csv", "", "CSV output path (empty = none)");
  return schema;
}

Options read_options(const Config& c) {
  Options o{{}, c.get_int_as<int>("bench.repeats"), c.get_string("bench.csv")};
  for (const auto t : c.get_int_list("bench.tokens"))
    for (auto& s : token_shapes(int(t))) o.shapes.push_back(s);
  // Attention per head (sequence 64, head width 16): scores Q K^T and the value product.
  o.shapes.push_back(packed_shape("attn QK^T", false, true, 64, 64, 16));
  o.shapes.push_back(packed_shape("attn PV", false, false, 64, 16, 64));
  o.shapes.push_back(packed_shape("square 1024", false, false, 1024, 1024, 1024));
  return o;
}

struct Peaks {
  double bf16, fp32;
};

// One shape's row of the table and the CSV.
void bench_shape(const Shape& shape, const Options& o, const Peaks& peak, const std::string& blas_core,
                 bench::CsvTable& csv) {
  const GemmShape& g = shape.gemm;
  Operands x = random_operands(g);
  const auto [sgemm_s, bf16_s] = time_pair(
      [&] {
        cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m,
                    g.n, g.k, 1.0f, x.a.data(), g.lda, x.b.data(), g.ldb, 0.0f, x.c.data(), g.ldc);
      },
      [&] { kernels::cpu::gemm_bf16_avx512(g, 1.0f, x.a.data(), x.b.data(), 0.0f, x.c.data()); }, o.repeats);
  const double flops = 2.0 * g.m * g.n * g.k;
  const double sgemm_rate = flops / sgemm_s, bf16_rate = flops / bf16_s;
  const std::string dims = std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
  using bench::significant;
  std::cout << std::left << std::setw(20) << shape.name << std::right << std::setw(18) << dims << std::setw(9)
            << significant(sgemm_rate / 1e9) << std::setw(9) << significant(bf16_rate / 1e9) << std::setw(8)
            << significant(bf16_rate / sgemm_rate, 3) << std::setw(9) << significant(bf16_rate / peak.bf16, 3) << "\n";
  const bench::Machine machine = bench::this_machine();  // the load beside each row
  csv.row({shape.name, blas_core, std::to_string(g.trans_a), std::to_string(g.trans_b), std::to_string(g.m),
           std::to_string(g.n), std::to_string(g.k), csv_number(sgemm_rate / 1e9), csv_number(bf16_rate / 1e9),
           csv_number(bf16_rate / sgemm_rate), csv_number(bf16_rate / peak.bf16), csv_number(peak.bf16 / 1e9),
           csv_number(peak.fp32 / 1e9), csv_number(machine.load_1m), csv_number(machine.load_5m),
           csv_number(machine.load_15m), machine.cpu_model});
}

void run(const Options& o) {
  openblas_set_num_threads(1);
  const Peaks peak{bf16_peak(), fp32_peak()};
  const std::string blas_core = openblas_get_corename();
  bench::print_machine_header(1);  // one core: OpenBLAS and the kernel run single-threaded
  std::cout << "OpenBLAS " << openblas_get_config() << ", kernels for core " << blas_core << "\n";
  std::cout << std::fixed << std::setprecision(1) << "one core: vdpbf16ps peak " << peak.bf16 / 1e9
            << " GFLOP/s, fp32 FMA peak " << peak.fp32 / 1e9 << " GFLOP/s (register-only loops)\n";
  bench::CsvTable csv(o.csv, {"shape", "sgemm_core", "trans_a", "trans_b", "m", "n", "k", "sgemm_gflops", "bf16_gflops",
                              "bf16_over_sgemm", "bf16_of_peak", "bf16_peak_gflops", "fp32_peak_gflops", "load_1m",
                              "load_5m", "load_15m", "cpu_model"});
  std::cout << std::left << std::setw(20) << "shape" << std::right << std::setw(18) << "m x n x k" << std::setw(9)
            << "sgemm" << std::setw(9) << "bf16" << std::setw(8) << "ratio" << std::setw(9) << "of peak"
            << "   (GFLOP/s)\n";
  for (const auto& s : o.shapes) bench_shape(s, o, peak, blas_core, csv);
}

}  // namespace

int main(int argc, char** argv) {
  const Schema schema = make_schema();
  try {
    const Config c = Config::parse(schema, argc, argv);
    if (c.answer_help_or_print(std::cout, true)) return 0;
    if (!kernels::cpu::has_avx512_bf16()) {
      std::cout << "SKIPPED: this CPU has no AVX512-BF16\n";
      return 0;
    }
    run(read_options(c));
    return 0;
  } catch (const Error& e) {
    std::cerr << "gemm_bench: " << e.what() << "\n";
    return 1;
  }
}
