// Sparse wide models (LR, FM, FFM) as seen by the kernels: the parameter layout, a CSR view of
// a mini-batch, and the per-batch gradient in the two schemas (classical per-sample loop and
// cuWide's flow over the sample/feature bigraph). CPU twins live in kernels/cpu/wide_*.cpp,
// CUDA twins in kernels/cuda/wide_*.cu; both fill the same outputs for the same inputs.
//
// Parameter layout (one flat float array, the model's "flat parameter vector"):
//   params[0]                      global bias
//   params[1 + f*row_len + 0]      linear weight w_f
//   params[1 + f*row_len + 1 ...]  latent part of feature f: v_f (FM, k floats) or
//                                  v_{f,field} (FFM, num_fields*k floats, field-major)
// so everything a feature owns is one contiguous row.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace skew::kernels {

enum class WideKind { LR, FM, FFM };
WideKind wide_kind_from_name(const std::string& name);  // "lr" | "fm" | "ffm"
const char* wide_kind_name(WideKind kind);

struct WideShape {
  WideKind kind = WideKind::LR;
  std::int64_t num_features = 0;
  int num_fields = 1;
  int k = 0;
  int latent_len() const { return kind == WideKind::LR ? 0 : kind == WideKind::FM ? k : num_fields * k; }
  int row_len() const { return 1 + latent_len(); }
  std::size_t num_params() const {
    return 1 + static_cast<std::size_t>(num_features) * static_cast<std::size_t>(row_len());
  }
};

// Rows [0, rows) of a CSR mini-batch. row_ptr holds absolute offsets into index/field/value
// (a batch is a window into a larger dataset). field may be null for LR/FM.
struct WideBatch {
  std::int64_t rows = 0;
  const std::int64_t* row_ptr = nullptr;
  const std::uint32_t* index = nullptr;
  const std::uint16_t* field = nullptr;
  const float* value = nullptr;
  const float* label = nullptr;  // 0/1
  std::int64_t nnz() const { return rows == 0 ? 0 : row_ptr[rows] - row_ptr[0]; }
};

// Bytes a training step moves per sample if every row it touches comes from memory (no reuse
// in the caches), the denominator of wide_bench's rows/s bound:
//   model: each of the sample's entries reads and writes its whole row (row_len floats) in each
//          of `arrays` model-shaped arrays: the parameters, the optimiser's state (AdaGrad n;
//          FTRL n and z) and, for the schemas that sum a batch gradient before updating, the
//          gradient (Hogwild has none);
//   input: per entry its id (uint32) and value (float), and its field (uint16) for FFM; per
//          sample its row offset (int64) and label (float), and its logit written (float).
struct WideRowTraffic {
  double model_bytes = 0, input_bytes = 0;
  double total() const { return model_bytes + input_bytes; }
};
inline WideRowTraffic wide_row_traffic(const WideShape& shape, double entries_per_row, int arrays) {
  const double field_bytes = shape.kind == WideKind::FFM ? 2.0 : 0.0;
  WideRowTraffic t;
  t.model_bytes = entries_per_row * double(shape.row_len()) * 4.0 * 2.0 * double(arrays);
  t.input_bytes = entries_per_row * (4.0 + 4.0 + field_bytes) + 8.0 + 4.0 + 4.0;
  return t;
}

inline float wide_sigmoid(float z) {
  return 1.0f / (1.0f + __builtin_expf(-z));
}

// One sample's logloss: the softplus of its signed logit x (-z for label 1, z for label 0),
// max(x, 0) + log1p(e^-|x|), in float math: within 1e-6 of the double value (tested), cheaper than
// double exp and log1p, which (in a pass of their own) were 9-10% of an LR run. NaN stays NaN.
inline double wide_logloss_term(float logit, float label) {
  const float x = label > 0.5f ? -logit : logit;
  return double((x > 0.0f ? x : 0.0f) + __builtin_log1pf(__builtin_expf(-__builtin_fabsf(x))));
}

// CPU: start fetching every cache line of a parameter row (rows of rare features are scattered
// over an array far larger than the caches; the loops that visit them know the next rows early).
// Always inlined, as is every function that only prefetches: GCC finds such a function pure (a
// prefetch has no effect that it models) and deletes the calls, their results being unused --
// which had taken out every prefetch of the per-sample loops (flow FFM, classical).
[[gnu::always_inline]] inline void wide_prefetch_row(const float* row, int row_len) {
  const char* first = reinterpret_cast<const char*>(row);
  const char* last = reinterpret_cast<const char*>(row + row_len - 1);
  for (const char* p = first; p < last; p += 64) __builtin_prefetch(p);
  __builtin_prefetch(last);
}

// The same with intent to write (PREFETCHW): for rows about to be updated whose lines another
// core holds after reading them, the line comes exclusive in one transaction, instead of shared
// and then upgraded, one serialised upgrade per line, at the store.
// GCC emits PREFETCHW only when told the CPU has it (-mprfchw); on x86-64 the instruction is
// written out (a CPU without it runs it as a no-op: its opcode is a NOP hint there).
[[gnu::always_inline]] inline void wide_prefetch_line_for_write(const char* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 1);
#endif
}

[[gnu::always_inline]] inline void wide_prefetch_row_for_write(float* row, int row_len) {
  const char* first = reinterpret_cast<const char*>(row);
  const char* last = reinterpret_cast<const char*>(row + row_len - 1);
  for (const char* p = first; p < last; p += 64) wide_prefetch_line_for_write(p);
  wide_prefetch_line_for_write(last);
}

// CPU: starts fetching every row sample i touches in up to three arrays laid out like the
// parameters (params, gradient or optimiser state; null ones skipped). The per-sample loops
// (classical, flow FFM) call it one sample ahead: a Criteo-like sample has about 40 entries,
// the distance flow LR prefetches its columns at.
[[gnu::always_inline]] inline void wide_prefetch_sample_rows(const WideBatch& b, int row_len, std::int64_t i,
                                                             const float* a, const float* c, const float* d) {
  for (std::int64_t e = b.row_ptr[i]; e < b.row_ptr[i + 1]; ++e) {
    const std::int64_t off = 1 + std::int64_t(b.index[e]) * row_len;
    wide_prefetch_row(a + off, row_len);
    if (c) wide_prefetch_row(c + off, row_len);
    if (d) wide_prefetch_row(d + off, row_len);
  }
}

// CPU: *dst += v, as a relaxed atomic add when other threads may add to the same float
// (Atomic), plainly otherwise. An object rather than a function template so that the kernels
// can also hand it on as the `add` of a shared per-entry body (kernels/wide_ffm.hpp).
template <bool Atomic>
struct WideAddTo {
  void operator()(float* dst, float v) const {
    if constexpr (Atomic) {
      std::atomic_ref<float>(*dst).fetch_add(v, std::memory_order_relaxed);
    } else {
      *dst += v;
    }
  }
};
template <bool Atomic>
inline constexpr WideAddTo<Atomic> wide_add_to{};

}  // namespace skew::kernels
