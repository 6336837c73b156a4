// Classical schema on the CPU: threads over chunks of samples; each sample gathers, predicts and
// scatters its own gradient into the shared array (atomic float adds when threads > 1).
#include "kernels/wide_classical.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/wide_ffm.hpp"

namespace skew::kernels {

WideKind wide_kind_from_name(const std::string& name) {
  if (name == "lr") return WideKind::LR;
  if (name == "fm") return WideKind::FM;
  if (name == "ffm") return WideKind::FFM;
  throw std::invalid_argument("unknown wide model '" + name + "' (expected lr, fm or ffm)");
}

const char* wide_kind_name(WideKind kind) {
  return kind == WideKind::LR ? "lr" : kind == WideKind::FM ? "fm" : "ffm";
}

namespace {

constexpr std::int64_t kSamplesPerTask = 64;

// Logit of sample i; `sums` (k floats) receives sum_j v_j x_j for FM.
inline float sample_logit(const WideShape& s, const WideBatch& b, const float* params, std::int64_t i,
                          float* sums) {
  const int row_len = s.row_len(), k = s.k;
  const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
  float z = params[0];
  if (s.kind == WideKind::LR) {
    for (std::int64_t e = begin; e < end; ++e) z += params[1 + std::int64_t(b.index[e]) * row_len] * b.value[e];
    return z;
  }
  if (s.kind == WideKind::FM) {
    for (int f = 0; f < k; ++f) sums[f] = 0.0f;
    float squares = 0.0f;
    for (std::int64_t e = begin; e < end; ++e) {
      const float* row = params + 1 + std::int64_t(b.index[e]) * row_len;
      const float x = b.value[e];
      z += row[0] * x;
      for (int f = 0; f < k; ++f) {
        const float vx = row[1 + f] * x;
        sums[f] += vx;
        squares += vx * vx;
      }
    }
    float interaction = -squares;
    for (int f = 0; f < k; ++f) interaction += sums[f] * sums[f];
    return z + 0.5f * interaction;
  }
  // FFM: sum over pairs i<j of <v_{i,field_j}, v_{j,field_i}> x_i x_j.
  for (std::int64_t e = begin; e < end; ++e) z = wide_ffm_entry_logit(b, k, row_len, params, e, end, z);
  return z;
}

template <bool Atomic>
inline void sample_scatter(const WideShape& s, const WideBatch& b, const float* params, std::int64_t i,
                           const float* sums, float g, float* grad) {
  const int row_len = s.row_len(), k = s.k;
  const std::int64_t begin = b.row_ptr[i], end = b.row_ptr[i + 1];
  for (std::int64_t e = begin; e < end; ++e) {
    const std::int64_t off = 1 + std::int64_t(b.index[e]) * row_len;
    if (s.kind == WideKind::FFM) {
      wide_ffm_entry_scatter(b, k, row_len, params, e, begin, end, g, grad + off, wide_add_to<Atomic>);
      continue;
    }
    const float x = b.value[e];
    wide_add_to<Atomic>(grad + off, g * x);
    if (s.kind == WideKind::FM) {
      const float* v = params + off + 1;
      for (int f = 0; f < k; ++f) wide_add_to<Atomic>(grad + off + 1 + f, g * x * (sums[f] - v[f] * x));
    }
  }
}

template <bool Atomic>
void classical(const WideShape& s, const WideBatch& b, const float* params, float* grad, float* logits,
               WidePool& pool) {
  const std::int64_t tasks = (b.rows + kSamplesPerTask - 1) / kSamplesPerTask;
  pool.run(tasks, [&](std::int64_t task, int) {
    std::vector<float> sums(static_cast<std::size_t>(s.k) + 1);
    float bias_grad = 0.0f;
    const std::int64_t end = std::min(b.rows, (task + 1) * kSamplesPerTask);
    for (std::int64_t i = task * kSamplesPerTask; i < end; ++i) {
      const float z = sample_logit(s, b, params, i, sums.data());
      logits[i] = z;
      const float g = wide_sigmoid(z) - b.label[i];
      bias_grad += g;
      sample_scatter<Atomic>(s, b, params, i, sums.data(), g, grad);
    }
    wide_add_to<Atomic>(grad, bias_grad);
  });
}

}  // namespace

void wide_forward(const WideShape& shape, const WideBatch& batch, const float* params, float* logits,
                  WidePool& pool) {
  const std::int64_t tasks = (batch.rows + kSamplesPerTask - 1) / kSamplesPerTask;
  pool.run(tasks, [&](std::int64_t task, int) {
    std::vector<float> sums(static_cast<std::size_t>(shape.k) + 1);
    const std::int64_t end = std::min(batch.rows, (task + 1) * kSamplesPerTask);
    for (std::int64_t i = task * kSamplesPerTask; i < end; ++i) logits[i] = sample_logit(shape, batch, params, i, sums.data());
  });
}

void wide_classical_gradient(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                             float* logits, WidePool& pool) {
  if (pool.threads() > 1)
    classical<true>(shape, batch, params, grad, logits, pool);
  else
    classical<false>(shape, batch, params, grad, logits, pool);
}

}  // namespace skew::kernels
