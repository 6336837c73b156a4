// The float64 reference of the wide models (logit, loss, gradient of LR/FM/FFM written the
// obvious way, in double) and a small renumbered synthetic setup, shared by the CPU tests
// (tests/unit/test_wide_model.cpp) and the CUDA tests (tests/cuda/test_wide_cuda.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/trainer.hpp"

namespace skew::wide::reference {

using kernels::WideKind;
using kernels::WideShape;

inline double ref_logit(const WideShape& s, const SparseDataset& d, std::int64_t i, const std::vector<double>& p) {
  const std::int64_t L = s.row_len();
  double z = p[0];
  for (std::int64_t a = d.row_ptr[i]; a < d.row_ptr[i + 1]; ++a) {
    const double xa = d.value[a];
    z += p[1 + d.index[a] * L] * xa;
    if (s.kind == WideKind::LR) continue;
    for (std::int64_t b = a + 1; b < d.row_ptr[i + 1]; ++b) {
      const double xb = d.value[b];
      const double* va = &p[std::size_t(1 + d.index[a] * L + 1 + (s.kind == WideKind::FFM ? d.field[b] * s.k : 0))];
      const double* vb = &p[std::size_t(1 + d.index[b] * L + 1 + (s.kind == WideKind::FFM ? d.field[a] * s.k : 0))];
      double dot = 0;
      for (int f = 0; f < s.k; ++f) dot += va[f] * vb[f];
      z += dot * xa * xb;
    }
  }
  return z;
}

inline double ref_loss(const WideShape& s, const SparseDataset& d, const std::vector<double>& p) {
  double sum = 0;
  for (std::int64_t i = 0; i < d.rows(); ++i) {
    const double z = ref_logit(s, d, i, p), y = d.label[std::size_t(i)];
    sum += std::log1p(std::exp(-z)) + (1 - y) * z;
  }
  return sum;
}

// Analytic gradient of the summed logloss, straight from the pairwise definition.
inline std::vector<double> ref_grad(const WideShape& s, const SparseDataset& d, const std::vector<double>& p) {
  const std::int64_t L = s.row_len();
  std::vector<double> g(p.size(), 0.0);
  for (std::int64_t i = 0; i < d.rows(); ++i) {
    const double r = 1.0 / (1.0 + std::exp(-ref_logit(s, d, i, p))) - d.label[std::size_t(i)];
    g[0] += r;
    for (std::int64_t a = d.row_ptr[i]; a < d.row_ptr[i + 1]; ++a) {
      g[std::size_t(1 + d.index[a] * L)] += r * d.value[a];
      if (s.kind == WideKind::LR) continue;
      for (std::int64_t b = d.row_ptr[i]; b < d.row_ptr[i + 1]; ++b) {
        if (b == a) continue;
        const std::int64_t ga = 1 + d.index[a] * L + 1 + (s.kind == WideKind::FFM ? d.field[b] * s.k : 0);
        const std::int64_t vb = 1 + d.index[b] * L + 1 + (s.kind == WideKind::FFM ? d.field[a] * s.k : 0);
        for (int f = 0; f < s.k; ++f) g[std::size_t(ga + f)] += r * p[std::size_t(vb + f)] * d.value[a] * d.value[b];
      }
    }
  }
  return g;
}

struct Setup {
  WideShape shape;
  SparseDataset data;
  WideModel model;
};

inline Setup make_setup(WideKind kind, std::int64_t rows, int k = 4) {
  Setup s;
  s.data = generate_synthetic(parse_synthetic_spec("synthetic:criteo?features=2000&alpha=1.3&seed=7"), 0, rows);
  for (std::size_t e = 0; e < s.data.value.size(); ++e) s.data.value[e] = 0.5f + 0.25f * float(e % 5);
  FeatureOrder::by_frequency(feature_counts(s.data, 2000)).apply(s.data);
  s.shape = WideShape{kind, 2000, 39, kind == WideKind::LR ? 0 : k};
  s.model = WideModel::create(s.shape, 11, 0.2f);
  Rng rng(5, 0);
  for (std::int64_t f = 0; f < 2000; ++f) s.model.params[std::size_t(1 + f * s.shape.row_len())] = 0.3f * rng.normal();
  s.model.params[0] = 0.1f;
  return s;
}

// make_setup with ragged rows: row i keeps its first 1 + (7 i) % 39 entries, so samples have
// every length from 1 to 39, odd and even (FFM's pair counts then leave every remainder over a
// warp's 32 lanes), and the hot features still repeat inside every tile.
inline Setup make_ragged_setup(WideKind kind, std::int64_t rows) {
  Setup s = make_setup(kind, rows);
  SparseDataset ragged;
  ragged.num_features = s.data.num_features;
  ragged.num_fields = s.data.num_fields;
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::size_t begin = std::size_t(s.data.row_ptr[std::size_t(i)]);
    const std::size_t n =
        std::min<std::size_t>(std::size_t(1 + (7 * i) % 39), std::size_t(s.data.row_ptr[std::size_t(i) + 1]) - begin);
    ragged.append_row(&s.data.index[begin], &s.data.field[begin], &s.data.value[begin], n,
                      s.data.label[std::size_t(i)]);
  }
  s.data = std::move(ragged);
  return s;
}

// The LR training run the flow tests compare: `optimizer` at lr 0.1, L2 1e-3, tiles of 16
// samples, 40 hot features.
inline TrainOptions lr_test_options(TrainSchema schema, const char* optimizer, int threads) {
  TrainOptions o;
  o.schema = schema;
  o.threads = threads;
  o.optimizer.kind = optimizer_from_name(optimizer);
  o.optimizer.lr = 0.1f;
  o.optimizer.l2 = 1e-3f;
  o.flow.tile_samples = 16;
  o.flow.hot_features = 40;
  return o;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// A setup's float64 logits and whole-batch gradient at its model's parameters.
struct BatchReference {
  std::vector<double> logits, grad;
  double grad_scale = 0;  // largest |gradient| entry
};

inline BatchReference batch_reference(const Setup& s) {
  const std::vector<double> p(s.model.params.begin(), s.model.params.end());
  BatchReference r;
  for (std::int64_t i = 0; i < s.data.rows(); ++i) r.logits.push_back(ref_logit(s.shape, s.data, i, p));
  r.grad = ref_grad(s.shape, s.data, p);
  r.grad_scale = max_abs(r.grad);
  return r;
}

// Largest deviation of float results from the reference: logits relative to max(1, |logit|),
// the gradient relative to the gradient's scale.
struct BatchError {
  double logit = 0, grad = 0;
};

inline BatchError batch_error(const BatchReference& ref, const std::vector<float>& logits,
                              const std::vector<float>& grad) {
  BatchError e;
  for (std::size_t i = 0; i < ref.logits.size(); ++i)
    e.logit = std::max(e.logit, std::fabs(double(logits[i]) - ref.logits[i]) / std::max(1.0, std::fabs(ref.logits[i])));
  for (std::size_t c = 0; c < ref.grad.size(); ++c)
    e.grad = std::max(e.grad, std::fabs(double(grad[c]) - ref.grad[c]) / ref.grad_scale);
  return e;
}

}  // namespace skew::wide::reference
