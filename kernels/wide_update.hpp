// The per-coordinate optimiser rules of the wide models (SGD, AdaGrad, FTRL-proximal), written
// once for the CPU optimiser (lib/wide/optimizer.cpp) and the CUDA one (kernels/cuda/
// wide_update.cu), and the CUDA side of a training step: listing the rows a batch touched and
// updating exactly those rows (lazy L2), as the CPU optimiser does from its touched list.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/host_device.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_model.hpp"

namespace skew::kernels {

enum class WideOptimizerKind { Sgd, AdaGrad, Ftrl };

struct WideUpdateRule {
  WideOptimizerKind kind = WideOptimizerKind::AdaGrad;
  float lr = 0.05f;   // SGD/AdaGrad step; FTRL's alpha
  float l2 = 0.0f;    // L2 strength (added to the gradient; FTRL: in the proximal term)
  float l1 = 0.0f;    // FTRL only
  float beta = 1.0f;  // FTRL only
  // AdaGrad's initial accumulator. The state starts as zero pages: a stored n of 0 stands for
  // eps (n >= eps > 0 once written), so n = (n == 0 ? eps : n) + g^2 is, bit for bit, the rule
  // on state filled with eps.
  float eps = 1e-6f;
};

// AdaGrad's accumulator after a gradient g: a stored 0 is the initial eps.
SKEW_HD inline float wide_adagrad_accumulate(float n, float g, float eps) {
  return (n == 0.0f ? eps : n) + g * g;
}

// One coordinate: w from its (scaled) gradient; n is AdaGrad's/FTRL's sum of squares, z FTRL's
// state (unused pointers may be null for the rules that do not read them).
SKEW_HD inline void wide_update_coordinate(const WideUpdateRule& o, float& w, float grad, float* n, float* z) {
  switch (o.kind) {
    case WideOptimizerKind::Sgd: w -= o.lr * (grad + o.l2 * w); break;
    case WideOptimizerKind::AdaGrad:
      grad += o.l2 * w;
      *n = wide_adagrad_accumulate(*n, grad, o.eps);
      w -= o.lr * grad / sqrtf(*n);
      break;
    case WideOptimizerKind::Ftrl: {
      const float n_new = *n + grad * grad;
      const float sigma = (sqrtf(n_new) - sqrtf(*n)) / o.lr;
      *z += grad - sigma * w;
      *n = n_new;
      w = fabsf(*z) <= o.l1 ? 0.0f : -(*z - copysignf(o.l1, *z)) / ((o.beta + sqrtf(n_new)) / o.lr + o.l2);
      break;
    }
  }
}

// The rule's state arrays, laid out like the parameters (null for the rules that keep none).
struct WideOptimizerState {
  float* n = nullptr;
  float* z = nullptr;
};

// CPU: params[offset, offset + count) from g[0, count) * scale, and g zeroed: the optimiser's
// loop over one row, shared by the mini-batch optimiser (lib/wide/optimizer.cpp) and the
// per-sample Hogwild classical kernel (kernels/cpu/wide_classical.cpp), so that both
// schemas apply exactly the same arithmetic. SGD and AdaGrad get loops of their own with the
// rule's branch outside: FFM's rows are ~150 floats and a Hogwild sample updates ~40 of them, so
// this loop is most of FFM's time, and only without the per-coordinate branch and null checks
// does it vectorise (square roots and divisions four or eight at a time). The arithmetic is
// wide_update_coordinate's, operation for operation, so results do not change.
[[gnu::always_inline]] inline void wide_update_row(const WideUpdateRule& r, float* params, float* g, std::size_t offset,
                                                   std::size_t count, float scale, WideOptimizerState state) {
  float* const w = params + offset;
  const float lr = r.lr, l2 = r.l2, eps = r.eps;
  switch (r.kind) {
    case WideOptimizerKind::Sgd:
      for (std::size_t j = 0; j < count; ++j) {
        const float grad = g[j] * scale;
        g[j] = 0.0f;
        w[j] -= lr * (grad + l2 * w[j]);
      }
      return;
    case WideOptimizerKind::AdaGrad: {
      float* const n = state.n + offset;
      for (std::size_t j = 0; j < count; ++j) {
        const float grad = g[j] * scale + l2 * w[j];
        g[j] = 0.0f;
        n[j] = wide_adagrad_accumulate(n[j], grad, eps);
        w[j] -= lr * grad / sqrtf(n[j]);
      }
      return;
    }
    case WideOptimizerKind::Ftrl:
      for (std::size_t j = offset; j < offset + count; ++j) {
        const float grad = g[j - offset] * scale;
        g[j - offset] = 0.0f;
        wide_update_coordinate(r, params[j], grad, state.n + j, state.z + j);
      }
      return;
  }
}

// The optimizer's step fused into a flow kernel (WideFlow::sparse_gradient): the task that
// completes a part of the batch gradient applies its rows, while they are in its core's cache.
struct WideFusedUpdate {
  WideUpdateRule rule;
  WideOptimizerState state;
  float* params = nullptr;
  float scale = 1.0f;
};

// CPU: row_of(i) (row_len floats) applied to features[i]'s parameter row for i in [first, end),
// and zeroed. The rows come in batch or block order, scattered over arrays that need not fit any
// cache: the parameter and state rows rows_ahead on are fetched while these update. LR's rows are
// one float, a few ns of work each, so it looks 32 rows ahead (8: a 2-thread LR update waited on
// the lines the other core had read; 32: +8% LR rows/s at 2 threads, 1 thread unchanged).
template <typename RowOf>
[[gnu::always_inline]] inline void wide_update_rows(const WideUpdateRule& r, float* params, WideOptimizerState state,
                                                    float scale, const std::uint32_t* features, std::size_t first,
                                                    std::size_t end, std::size_t row_len, RowOf row_of) {
  const std::size_t rows_ahead = row_len == 1 ? 32 : 8;
  const int len = int(row_len);
  for (std::size_t i = first; i < end; ++i) {
    if (i + rows_ahead < end) {
      const std::size_t ahead = 1 + features[i + rows_ahead] * row_len;
      wide_prefetch_row_for_write(params + ahead, len);
      if (state.n) wide_prefetch_row_for_write(state.n + ahead, len);
      if (state.z) wide_prefetch_row_for_write(state.z + ahead, len);
    }
    wide_update_row(r, params, row_of(i), 1 + features[i] * row_len, row_len, scale, state);
  }
}

#if defined(SKEW_WITH_CUDA)
// The rows a step touched, on the device: `bits` has one bit per feature (set while it is in
// `list`), `list` room for every feature, `count` its length. All zero between steps.
struct WideTouchedRows {
  std::uint32_t* bits = nullptr;
  std::int64_t* list = nullptr;
  unsigned long long* count = nullptr;
};
// Lists every feature of the batch's entries [base, base + nnz) not listed yet (device pointers).
void wide_mark_touched_cuda(const WideBatch& batch, std::int64_t base, std::int64_t nnz, const WideTouchedRows& rows,
                            void* stream);
// The bias and every listed row: params from grad * scale; grad rows, bits and count zeroed.
// max_rows: a bound on count known on the host (it sizes the launch). n and z are the rule's
// state arrays (num_params floats each, null when the rule has none).
void wide_update_cuda(const WideShape& shape, const WideUpdateRule& rule, float scale, const WideTouchedRows& rows,
                      std::int64_t max_rows, float* params, float* grad, float* n, float* z, void* stream);
// Moves the listed rows out of grad: packed[t] = gradient row of list[t] for t < count (row_len
// floats each; max_rows bounds count), the rows zeroed and their bits cleared (the group's rows,
// a whatever set the exchange returns, are unpacked in their place; count stays).
void wide_pack_rows_cuda(const WideShape& shape, const WideTouchedRows& rows, std::int64_t max_rows, float* grad,
                         float* packed, void* stream);
// The reverse for `count` rows named by `list` (device pointers): grad row list[t] = packed[t].
void wide_unpack_rows_cuda(const WideShape& shape, const std::int64_t* list, std::int64_t count, const float* packed,
                           float* grad, void* stream);
#endif

}  // namespace skew::kernels
