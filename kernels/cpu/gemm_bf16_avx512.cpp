#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_bf16.hpp"

namespace skew::kernels::cpu {

bool has_avx512_bf16() {
  static const bool supported = __builtin_cpu_supports("avx512bf16");
  return supported;
}

// Everything below may use AVX-512 instructions; only gemm_bf16_avx512 is reachable from outside, and
// callers check has_avx512_bf16() first. The region keeps the global compile flags unchanged.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector, which -O3 reports as
// uninitialised once inlined (GCC PR 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

// Packed operands are arrays of 32-bit "pairs": the low half holds the bf16 of element k (even), the
// high half the bf16 of element k + 1, so that one vdpbf16ps lane computes a[k] b[k] + a[k+1] b[k+1].
// A is packed in panels of kMr rows laid out [pair][row] (the micro-kernel broadcasts one pair per
// row and step); B in panels of kNr columns laid out [pair][column] (two zmm loads per step).
using Pair = std::uint32_t;
constexpr int kMr = 8;   // rows of C per micro-kernel (16 where n <= 16): 16 zmm accumulators
constexpr int kNr = 32;  // columns of C per micro-kernel (two zmm of fp32)
// Cache blocking. A KC x NR panel of B (16 KiB) stays in L1 while the micro-kernel sweeps the MC x KC
// block of A (64 KiB, L2); the KC x NC block of B (256 KiB) stays in L2.
constexpr int kKc = 256;  // k per block (even, so blocks split on pair boundaries)
constexpr int kMc = 128;
constexpr int kNc = 512;

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

__mmask16 first_lanes(int count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max(count, 0)) - 1u);
}

// Rounds 32 floats (lo = elements 0..15, hi = 16..31) to bf16, nearest even, as 16 consecutive pairs.
__m512i round_to_pairs(__m512 lo, __m512 hi) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// Stores 16 pairs that belong to 16 consecutive x (rows of A or columns of B), starting at x, into
// panels of kWidth (8 or 32) x laid out [pair][x]. `panels` bounds the destination.
template <int kWidth>
void store_pairs(__m512i v, Pair* dst, int p, int kp, int x, int panels) {
  const int panel = x / kWidth;
  Pair* row = dst + (static_cast<std::size_t>(panel) * kp + p) * kWidth + x % kWidth;
  if constexpr (kWidth >= 16) {
    _mm512_storeu_si512(row, v);
  } else {
    // Width 8: the upper 8 pairs go to the next panel; a masked store puts lane 8 at its start.
    _mm512_mask_storeu_epi32(row, 0x00FF, v);
    if (panel + 1 < panels) _mm512_mask_storeu_epi32(row + static_cast<std::size_t>(kp) * kWidth - 8, 0xFF00, v);
  }
}

// Packs xc x kc of a matrix stored with k along rows (element (k, x) at src[k * ld + x]): B without
// transpose, A transposed. Pair p of x interleaves rows 2p and 2p + 1; an odd kc pads with zero.
template <int kWidth>
void pack_k_rows(const float* src, int ld, int kc, int xc, Pair* dst) {
  const int kp = ceil_div(kc, 2), panels = ceil_div(xc, kWidth);
  // Word i of the source vector comes from row 2p (i < 16) or 2p + 1 (i >= 16), column i % 16.
  alignas(64) static const std::uint16_t interleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(interleave);
  for (int x = 0; x < panels * kWidth; x += 16) {
    const __mmask16 mask = first_lanes(xc - x);
    for (int p = 0; p < kp; ++p) {
      const float* even = src + static_cast<std::size_t>(2 * p) * ld + x;
      const __m512 lo = _mm512_maskz_loadu_ps(mask, even);
      const __m512 hi = 2 * p + 1 < kc ? _mm512_maskz_loadu_ps(mask, even + ld) : _mm512_setzero_ps();
      store_pairs<kWidth>(_mm512_permutexvar_epi16(order, round_to_pairs(lo, hi)), dst, p, kp, x, panels);
    }
  }
}

// Transposes 16 x 16 32-bit elements: on return r[j] holds what was column j.
// Inlined so that the 16 rows stay in registers.
__attribute__((always_inline)) inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i lanes01_rows0to7 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i lanes23_rows0to7 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i lanes01_rows8to15 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i lanes23_rows8to15 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[0 + j] = _mm512_shuffle_i32x4(lanes01_rows0to7, lanes01_rows8to15, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(lanes01_rows0to7, lanes01_rows8to15, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(lanes23_rows0to7, lanes23_rows8to15, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(lanes23_rows0to7, lanes23_rows8to15, 0xDD);
  }
}

// Packs xc x kc of a matrix stored with x along rows (element (k, x) at src[x * ld + k]): A without
// transpose, B transposed. Rows are rounded 32 k at a time into 16 pairs, then 16 x 16 blocks of
// pairs are transposed into the [pair][x] panel layout. Missing rows and k are zero.
template <int kWidth>
void pack_x_rows(const float* src, int ld, int kc, int xc, Pair* dst) {
  const int kp = ceil_div(kc, 2), panels = ceil_div(xc, kWidth);
  for (int x = 0; x < panels * kWidth; x += 16) {
    for (int k = 0; k < kc; k += 32) {
      const __mmask16 lo_mask = first_lanes(kc - k), hi_mask = first_lanes(kc - k - 16);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        if (x + i >= xc) {
          r[i] = _mm512_setzero_si512();
          continue;
        }
        const float* row = src + static_cast<std::size_t>(x + i) * ld + k;
        r[i] = round_to_pairs(_mm512_maskz_loadu_ps(lo_mask, row), _mm512_maskz_loadu_ps(hi_mask, row + 16));
      }
      transpose16(r);
      const int p0 = k / 2, pairs = std::min(16, kp - p0);
      for (int j = 0; j < pairs; ++j) store_pairs<kWidth>(r[j], dst, p0 + j, kp, x, panels);
    }
  }
}

// Packs op(X)'s xc x kc block at (x0, k0) into panels; `k_rows` says whether k runs along the rows of
// the stored matrix (it does for A^T and for B).
template <int kWidth>
void pack(const float* x, int ld, bool k_rows, int x0, int k0, int xc, int kc, Pair* dst) {
  if (k_rows)
    pack_k_rows<kWidth>(x + static_cast<std::size_t>(k0) * ld + x0, ld, kc, xc, dst);
  else
    pack_x_rows<kWidth>(x + static_cast<std::size_t>(x0) * ld + k0, ld, kc, xc, dst);
}

// C[0..kRows, 0..16 kVecs) = alpha * (A panels)(B panel) + beta * C over kp pairs; the last vector's
// columns are limited by `last_mask`. beta == 0 does not read C. Rows past kMr come from the next A
// panel: a one-vector tile (n <= 16) takes 16 rows, so that it still has 16 accumulators.
template <int kRows, int kVecs>
void micro_kernel(int kp, const Pair* a, const Pair* b, float* c, int ldc, __mmask16 last_mask, float alpha,
                  float beta) {
  const std::size_t a_panel_size = static_cast<std::size_t>(kp) * kMr;
  __m512 acc[kRows][kVecs];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int p = 0; p < kp; ++p) {
    __m512bh bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + 16 * v));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const Pair pair = a[(r / kMr) * a_panel_size + r % kMr];
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
    a += kMr;
    b += kNr;
  }
  const __m512 alpha_v = _mm512_set1_ps(alpha), beta_v = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) {
      float* dst = c + static_cast<std::size_t>(r) * ldc + 16 * v;
      const __mmask16 mask = v == kVecs - 1 ? last_mask : static_cast<__mmask16>(0xFFFF);
      __m512 out = _mm512_mul_ps(alpha_v, acc[r][v]);
      if (beta != 0.0f) out = _mm512_fmadd_ps(beta_v, _mm512_maskz_loadu_ps(mask, dst), out);
      _mm512_mask_storeu_ps(dst, mask, out);
    }
}

using MicroKernel = void (*)(int, const Pair*, const Pair*, float*, int, __mmask16, float, float);

template <int kVecs, std::size_t... kRowsMinus1>
constexpr auto kernels_by_rows(std::index_sequence<kRowsMinus1...>) {
  return std::array<MicroKernel, sizeof...(kRowsMinus1)>{&micro_kernel<static_cast<int>(kRowsMinus1) + 1, kVecs>...};
}

// Rows per tile: 16 x 1 vector or 8 x 2 vectors of accumulators.
int tile_rows(int cols) {
  return cols > 16 ? kMr : 2 * kMr;
}

// Each (row count, 16-column vector count) tile, edges included, calls a kernel specialised for it.
MicroKernel select_kernel(int rows, int cols) {
  static constexpr auto one_vector = kernels_by_rows<1>(std::make_index_sequence<2 * kMr>());
  static constexpr auto two_vectors = kernels_by_rows<2>(std::make_index_sequence<kMr>());
  return (cols > 16 ? two_vectors.data() : one_vector.data())[rows - 1];
}

// C = beta * C without reading C when beta == 0 (k == 0: there is no product to add).
void scale_c(const GemmShape& s, float beta, float* c) {
  for (int i = 0; i < s.m; ++i) {
    float* row = c + static_cast<std::size_t>(i) * s.ldc;
    for (int j = 0; j < s.n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

}  // namespace

void gemm_bf16_avx512(const GemmShape& s, float alpha, const float* a, const float* b, float beta, float* c) {
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) return scale_c(s, beta, c);
  // Reused across calls: the moe shapes are small enough that allocating per call would show.
  thread_local std::vector<Pair> a_packed, b_packed;
  a_packed.resize(static_cast<std::size_t>(ceil_div(std::min(s.m, kMc), kMr)) * kMr * (kKc / 2));
  b_packed.resize(static_cast<std::size_t>(ceil_div(std::min(s.n, kNc), kNr)) * kNr * (kKc / 2));
  for (int jc = 0; jc < s.n; jc += kNc) {
    const int nc = std::min(kNc, s.n - jc);
    for (int pc = 0; pc < s.k; pc += kKc) {
      const int kc = std::min(kKc, s.k - pc), kp = ceil_div(kc, 2);
      // Later k blocks add to what the first one wrote.
      const float block_beta = pc == 0 ? beta : 1.0f;
      pack<kNr>(b, s.ldb, !s.trans_b, jc, pc, nc, kc, b_packed.data());
      for (int ic = 0; ic < s.m; ic += kMc) {
        const int mc = std::min(kMc, s.m - ic);
        pack<kMr>(a, s.lda, s.trans_a, ic, pc, mc, kc, a_packed.data());
        for (int jr = 0; jr < nc; jr += kNr) {
          const int cols = std::min(kNr, nc - jr);
          const __mmask16 last_mask = first_lanes(cols > 16 ? cols - 16 : cols);
          const Pair* b_panel = b_packed.data() + static_cast<std::size_t>(jr / kNr) * kp * kNr;
          for (int ir = 0; ir < mc; ir += tile_rows(cols)) {
            const int rows = std::min(tile_rows(cols), mc - ir);
            const Pair* a_panel = a_packed.data() + static_cast<std::size_t>(ir / kMr) * kp * kMr;
            float* c_tile = c + static_cast<std::size_t>(ic + ir) * s.ldc + jc + jr;
            select_kernel(rows, cols)(kp, a_panel, b_panel, c_tile, s.ldc, last_mask, alpha, block_beta);
          }
        }
      }
    }
  }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace skew::kernels::cpu
