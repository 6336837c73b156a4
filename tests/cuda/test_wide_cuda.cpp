// CUDA twins of the wide kernels against the CPU kernels on the same batch (LR and FM).
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "lib/core/cuda_check.hpp"
#include "lib/wide/model.hpp"
#include "tests/cuda_skip.hpp"

using namespace skew;
using namespace skew::wide;

namespace {
template <typename T>
T* to_device(const std::vector<T>& v) {
  T* p = nullptr;
  SKEW_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(1, v.size()) * sizeof(T)));
  SKEW_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}
template <typename T>
std::vector<T> to_host(const T* p, std::size_t n) {
  std::vector<T> v(n);
  SKEW_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}
}  // namespace

TEST_CASE("CUDA classical and flow gradients equal the CPU kernels") {
  SKEW_REQUIRE_GPU();
  SparseDataset d = generate_synthetic(parse_synthetic_spec("synthetic:criteo?features=5000&alpha=1.2&seed=9"), 0, 1000);
  FeatureOrder::by_frequency(feature_counts(d, 5000)).apply(d);
  for (kernels::WideKind kind : {kernels::WideKind::LR, kernels::WideKind::FM}) {
    const kernels::WideShape shape{kind, 5000, 39, kind == kernels::WideKind::LR ? 0 : 16};
    WideModel m = WideModel::create(shape, 2, 0.1f);
    for (std::int64_t f = 0; f < 5000; ++f) m.params[std::size_t(1 + f * shape.row_len())] = 0.01f * float(f % 17) - 0.08f;
    kernels::WidePool pool(1);
    std::vector<float> grad_cpu(m.params.size(), 0.0f), logits_cpu(std::size_t(d.rows()));
    kernels::wide_classical_gradient(shape, d.batch(0, d.rows()), m.params.data(), grad_cpu.data(), logits_cpu.data(), pool);
    double scale = 0;
    for (float g : grad_cpu) scale = std::max(scale, double(std::fabs(g)));

    kernels::WideBatch db;
    db.rows = d.rows();
    auto* row_ptr = to_device(d.row_ptr);
    auto* index = to_device(d.index);
    auto* value = to_device(d.value);
    auto* label = to_device(d.label);
    auto* params = to_device(m.params);
    db.row_ptr = row_ptr;
    db.index = index;
    db.value = value;
    db.label = label;
    float *grad, *logits;
    SKEW_CUDA_CHECK(cudaMalloc(&grad, m.params.size() * sizeof(float)));
    SKEW_CUDA_CHECK(cudaMalloc(&logits, std::size_t(d.rows()) * sizeof(float)));
    for (const char* schema : {"classical", "flow"}) {
      SKEW_CUDA_CHECK(cudaMemset(grad, 0, m.params.size() * sizeof(float)));
      if (std::string(schema) == "flow")
        kernels::wide_flow_gradient_cuda(shape, kernels::WideFlowOptions{32, 256}, db, params, grad, logits, nullptr);
      else
        kernels::wide_classical_gradient_cuda(shape, db, params, grad, logits, nullptr);
      SKEW_CUDA_CHECK(cudaDeviceSynchronize());
      const auto g = to_host(grad, m.params.size());
      const auto z = to_host(logits, std::size_t(d.rows()));
      INFO(kernels::wide_kind_name(kind) << " " << schema);
      for (std::size_t i = 0; i < z.size(); ++i) REQUIRE(z[i] == Approx(logits_cpu[i]).margin(1e-4));
      double worst = 0;
      for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, double(std::fabs(g[i] - grad_cpu[i])));
      CHECK(worst < 1e-4 * scale);
    }
    for (void* p : {static_cast<void*>(row_ptr), static_cast<void*>(index), static_cast<void*>(value),
                    static_cast<void*>(label), static_cast<void*>(params), static_cast<void*>(grad), static_cast<void*>(logits)})
      SKEW_CUDA_CHECK(cudaFree(p));
  }
}
