// moe_gpu_bench's experts row (CUDA builds only; included by apps/moe_gpu_bench.cpp): the
// grouped bf16 GEMM over skewed (Zipf) group sizes, three ways (fp32 operands rounded in every
// call; expert weights kept in bf16, activations rounded per call, as the trainer does; both
// operands already bf16), the backward shapes and cuBLAS variants beside them, and one cuBLAS
// bf16 GEMM of the same total shape with operands already in bf16 as the baseline.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/bench/device_operand.hpp"
#include "apps/moe_gpu_bench_kernels.hpp"
#include "apps/moe_gpu_bench_options.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda_timing.hpp"
#include "kernels/moe_expert.hpp"

namespace skew::bench {

// The experts' operands on the device: activations a [rows, k] and per-group weights b[g]
// [k, n] in fp32 and as bf16 bits (weights rounded once, as after an optimizer step), output c.
struct ExpertOperands {
  std::vector<std::int64_t> offsets;
  std::vector<float> a_host, b_host;  // a and group 0's weights, for the one-GEMM baseline
  DeviceOperand<float> a, c;
  std::vector<DeviceOperand<float>> b;
  DeviceOperand<std::uint16_t> a_bits;
  std::vector<DeviceOperand<std::uint16_t>> b_bits;
  std::vector<float*> b_ptrs;
  std::vector<const std::uint16_t*> b_bits_ptrs;

  explicit ExpertOperands(const Sizes& s)
      : offsets(skewed_offsets(s.groups, s.gemm_rows, s.zipf)),
        a_host(random_floats(a_len(s), 3)),
        b_host(random_floats(b_len(s), 10)),
        a(a_host),
        c{std::size_t(s.gemm_rows) * std::size_t(s.gemm_n)},
        a_bits(a_len(s)) {
    for (int g = 0; g < s.groups; ++g) {
      b.emplace_back(g == 0 ? b_host : random_floats(b_len(s), 10 + std::uint64_t(g)));
      b_ptrs.push_back(b.back());
    }
    for (int g = 0; g < s.groups; ++g) {
      b_bits.emplace_back(b_len(s));
      kernels::moe::to_bf16_bits(Device::Cuda, b[std::size_t(g)], std::int64_t(b_len(s)), b_bits.back());
      b_bits_ptrs.push_back(b_bits.back());
    }
  }
  static std::size_t a_len(const Sizes& s) { return std::size_t(s.gemm_rows) * std::size_t(s.gemm_k); }
  static std::size_t b_len(const Sizes& s) { return std::size_t(s.gemm_k) * std::size_t(s.gemm_n); }
  int rows_of(int g) const { return int(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]); }
  std::vector<float> read_c(const Sizes& s) const {
    std::vector<float> host(std::size_t(s.gemm_rows) * std::size_t(s.gemm_n));
    SKEW_CUDA_CHECK(cudaMemcpy(host.data(), c, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }
};

// The MoE layer's backward shapes on the same rows (moe_layer_experts.cpp): dx = dy W^T on the
// cached bf16 weights (transposed), and the weight gradients dW_g += x_g^T dy_g (activations,
// rounded inside the call); c stands in for dy.
inline void bench_expert_backward(const Sizes& s, ExpertOperands& x, int repeats, Json& variants) {
  namespace km = kernels::moe;
  const std::size_t c_len = std::size_t(s.gemm_rows) * std::size_t(s.gemm_n);
  const DeviceOperand<std::uint16_t> dy_bits(c_len);
  const DeviceOperand<float> dx(ExpertOperands::a_len(s));
  variants["backward_dx_ms"] = kernels::cuda::median_ms(repeats, [&] {
    km::to_bf16_bits(Device::Cuda, x.c, std::int64_t(c_len), dy_bits);
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, x.offsets.data(), true, s.gemm_k, s.gemm_n, dy_bits,
                                   x.b_bits_ptrs.data(), 0.f, dx);
  });
  variants["weight_grads_ms"] = kernels::cuda::median_ms(repeats, [&] {
    km::grouped_gemm_weight_grads(Device::Cuda, true, s.groups, x.offsets.data(), s.gemm_k, s.gemm_n, x.a, x.c,
                                  x.b_ptrs.data());
  });
}

// The per-expert loop writing bf16 outputs as PyTorch's does (half the output bytes).
inline double bf16_out_ms(const Sizes& s, const ExpertOperands& x, int repeats) {
  const DeviceOperand<__nv_bfloat16> c16{std::size_t(s.gemm_rows) * std::size_t(s.gemm_n)};
  return kernels::cuda::median_ms(repeats, [&] {
    for (int g = 0; g < s.groups; ++g) {
      const int rows = x.rows_of(g);
      if (rows == 0) continue;
      const float one = 1.f, zero = 0.f;
      const std::int64_t at = x.offsets[std::size_t(g)];
      SKEW_CUBLAS_CHECK(cublasGemmEx(
          kernels::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, s.gemm_n, rows, s.gemm_k, &one,
          x.b_bits_ptrs[std::size_t(g)], CUDA_R_16BF, s.gemm_n, x.a_bits.get() + at * s.gemm_k, CUDA_R_16BF, s.gemm_k,
          &zero, c16.get() + at * s.gemm_n, CUDA_R_16BF, s.gemm_n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  });
}

// cuBLAS's grouped-batched call (one launch for all experts; pointer arrays in device memory,
// sizes on the host), checked against the grouped loop's product before its time is trusted.
// A cuBLAS build without it is reported in `variants`, not fatal.
inline void bench_grouped_batched(const Sizes& s, ExpertOperands& x, int repeats, Json& variants) {
  std::vector<const void*> a_ptrs, b_ptrs;
  std::vector<void*> c_ptrs;
  std::vector<int> m_sizes, n_sizes, k_sizes, lda, ldb, ldc, group_size;
  std::vector<cublasOperation_t> ops;
  std::vector<float> alphas, betas;
  for (int g = 0; g < s.groups; ++g) {
    const int rows = x.rows_of(g);
    if (rows == 0) continue;
    a_ptrs.push_back(x.a_bits.get() + x.offsets[std::size_t(g)] * s.gemm_k);
    b_ptrs.push_back(x.b_bits_ptrs[std::size_t(g)]);
    c_ptrs.push_back(x.c.get() + x.offsets[std::size_t(g)] * s.gemm_n);
    m_sizes.push_back(s.gemm_n), n_sizes.push_back(rows), k_sizes.push_back(s.gemm_k);
    lda.push_back(s.gemm_n), ldb.push_back(s.gemm_k), ldc.push_back(s.gemm_n);
    group_size.push_back(1), ops.push_back(CUBLAS_OP_N), alphas.push_back(1.f), betas.push_back(0.f);
  }
  const DeviceOperand<const void*> d_a(b_ptrs);  // column-major: B^T is the first operand
  const DeviceOperand<const void*> d_b(a_ptrs);
  const DeviceOperand<void*> d_c(c_ptrs);
  kernels::moe::grouped_gemm_bf16_operands(Device::Cuda, s.groups, x.offsets.data(), s.gemm_n, s.gemm_k, x.a_bits,
                                           x.b_bits_ptrs.data(), x.c);
  const std::vector<float> loop_c = x.read_c(s);
  try {
    SKEW_CUDA_CHECK(cudaMemset(x.c, 0xff, loop_c.size() * sizeof(float)));  // NaN: unwritten outputs show
    variants["grouped_batched_ms"] = kernels::cuda::median_ms(repeats, [&] {
      SKEW_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
          kernels::cuda::cublas_handle(), ops.data(), ops.data(), m_sizes.data(), n_sizes.data(), k_sizes.data(),
          alphas.data(), d_a, CUDA_R_16BF, lda.data(), d_b, CUDA_R_16BF, ldb.data(), betas.data(), d_c, CUDA_R_32F,
          ldc.data(), int(group_size.size()), group_size.data(), CUBLAS_COMPUTE_32F));
    });
    const std::vector<float> grouped_c = x.read_c(s);
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < loop_c.size(); ++i) {
      diff += (double(grouped_c[i]) - loop_c[i]) * (double(grouped_c[i]) - loop_c[i]);
      norm += double(loop_c[i]) * loop_c[i];
    }
    variants["grouped_batched_rel_l2"] = std::sqrt(diff / norm);  // NaN if any output was left unwritten
  } catch (const Error& e) {
    variants["grouped_batched_error"] = e.what();
  }
}

// Baseline: one bf16 GEMM of the same total shape, operands converted once beforehand.
inline double one_gemm_ms(const Sizes& s, const ExpertOperands& x, int repeats) {
  std::vector<__nv_bfloat16> a16(x.a_host.size()), b16(x.b_host.size());
  for (std::size_t i = 0; i < a16.size(); ++i) a16[i] = __float2bfloat16(x.a_host[i]);
  for (std::size_t i = 0; i < b16.size(); ++i) b16[i] = __float2bfloat16(x.b_host[i]);
  const DeviceOperand<__nv_bfloat16> da16(a16), db16(b16);
  cublasHandle_t handle;
  SKEW_CUBLAS_CHECK(cublasCreate(&handle));
  const float alpha = 1.f, beta = 0.f;
  const double ms = kernels::cuda::median_ms(repeats, [&] {
    SKEW_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, s.gemm_n, int(s.gemm_rows), s.gemm_k, &alpha, db16,
                                   CUDA_R_16BF, s.gemm_n, da16, CUDA_R_16BF, s.gemm_k, &beta, x.c, CUDA_R_32F, s.gemm_n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  SKEW_CUBLAS_CHECK(cublasDestroy(handle));
  return ms;
}

// The row: TFLOP/s of each form against the one-GEMM baseline. Where the gap to PyTorch's
// per-expert loop comes from: the variants (backward shapes, bf16 outputs, grouped-batched).
inline Json bench_experts(const Sizes& s, int repeats) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  ExpertOperands x(s);
  const std::int64_t* offsets = x.offsets.data();
  const double grouped_ms = median_ms(repeats, [&] {
    km::grouped_gemm_bf16(Device::Cuda, s.groups, offsets, s.gemm_n, s.gemm_k, x.a, x.b_ptrs.data(), x.c);
  });
  const double cached_ms = median_ms(repeats, [&] {
    km::to_bf16_bits(Device::Cuda, x.a, std::int64_t(ExpertOperands::a_len(s)), x.a_bits);
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets, s.gemm_n, s.gemm_k, x.a_bits, x.b_bits_ptrs.data(),
                                   x.c);
  });
  // Both operands already bf16 (what PyTorch's per-expert loop times): the GEMMs alone.
  const double operands_ms = median_ms(repeats, [&] {
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets, s.gemm_n, s.gemm_k, x.a_bits, x.b_bits_ptrs.data(),
                                   x.c);
  });
  Json variants = Json::object();
  bench_expert_backward(s, x, repeats, variants);
  variants["bf16_out_ms"] = bf16_out_ms(s, x, repeats);
  bench_grouped_batched(s, x, repeats, variants);
  const double large_ms = one_gemm_ms(s, x, repeats);
  const double flops = 2.0 * double(s.gemm_rows) * s.gemm_n * s.gemm_k;
  for (const char* key : {"bf16_out", "grouped_batched", "backward_dx", "weight_grads"})
    if (variants.contains(std::string(key) + "_ms"))
      variants[std::string(key) + "_TFLOPs"] = flops / (variants[std::string(key) + "_ms"].get<double>() * 1e-3) / 1e12;
  Json sizes = Json::array();
  for (int g = 0; g < s.groups; ++g) sizes.push_back(x.rows_of(g));
  return Json{{"group_rows", sizes},
              {"grouped_ms", grouped_ms},
              {"grouped_TFLOPs", flops / (grouped_ms * 1e-3) / 1e12},
              {"cached_weights_ms", cached_ms},
              {"cached_weights_TFLOPs", flops / (cached_ms * 1e-3) / 1e12},
              {"bf16_operands_ms", operands_ms},
              {"bf16_operands_TFLOPs", flops / (operands_ms * 1e-3) / 1e12},
              {"variants", variants},
              {"one_gemm_ms", large_ms},
              {"one_gemm_TFLOPs", flops / (large_ms * 1e-3) / 1e12},
              {"of_one_gemm", large_ms / grouped_ms}};
}

}  // namespace skew::bench
#endif
