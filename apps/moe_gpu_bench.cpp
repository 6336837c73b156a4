// moe_gpu_bench: the CUDA MoE kernels against their bounds, measured in one run with CUDA events
// (median of repeats):
//   gate      softmax + top-k of [tokens, experts] logits: GB/s against the device copy bandwidth
//   dispatch  histogram + exclusive scan + stable positions + row permutation of every
//             (token, expert) assignment: GB/s against the copy bound for the same bytes
//   elementwise  GELU forward and AdamW over 2^26 floats, against the copy bound
//   rowwise   layernorm, embedding, causal softmax (forward and backward), cross-entropy and the
//             gradient norm at a step's shape, against their memory bounds
//             (apps/moe_gpu_bench_rowwise.hpp)
//   dense GPT block  one block's forward + backward through lib/moe/ops on the GPU at the step's
//             shape (d = bench.width, d_ff = 4 d): tokens/s and GEMM TFLOP/s, fp32 and bf16
//             (apps/moe_gpu_bench_block.hpp)
//   experts   grouped bf16 GEMM over skewed (Zipf) group sizes, three ways: fp32 operands rounded
//             in every call; expert weights kept in bf16 (activations rounded per call, as the
//             trainer does); both operands already bf16. TFLOP/s against one cuBLAS bf16 GEMM of
//             the same total shape (rows x k x n) with operands already in bf16
//   GPT-MoE model step  issue 19's whole model through moe_train's Session on the GPU: tokens/s,
//             the step's split and the expert GEMMs' TFLOP/s (apps/moe_gpu_bench_model.hpp)
// bench.rows picks the kernel rows, the model row or both; bench.model_device=cpu dry-runs the
// model row on the host.
// scripts/device/torch_moe.py (kernels) and torch_gpt_moe.py (model) time PyTorch's equivalents. Without a GPU (or
// in a build without CUDA) it prints a SKIPPED line and the sizes it would use.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

#include "apps/moe_gpu_bench_model.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/rng.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_expert.hpp"
#include "kernels/moe_gate.hpp"
#include "mpi/runtime.hpp"

#if defined(SKEW_WITH_CUDA)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "apps/moe_gpu_bench_block.hpp"
#include "apps/moe_gpu_bench_rowwise.hpp"
#include "core/cuda_check.hpp"
#include "kernels/cuda/cublas_handle.hpp"
#include "kernels/cuda_memory.hpp"
#include "kernels/cuda_timing.hpp"
#endif

using namespace skew;
namespace km = skew::kernels::moe;  // not `moe`: skew::moe (the dense block) is visible too

namespace {

struct Sizes {
  std::int64_t tokens;
  int experts, topk, width, groups, gemm_n, gemm_k;
  std::int64_t gemm_rows;
  double zipf;
};

// Rows per expert group drawn from a Zipf law (expert g gets weight 1/(g+1)^s): the skew the
// grouped GEMM must cope with. Offsets sum to `rows`.
std::vector<std::int64_t> skewed_offsets(int groups, std::int64_t rows, double s) {
  std::vector<double> w(static_cast<std::size_t>(groups));
  double total = 0;
  for (int g = 0; g < groups; ++g) total += w[std::size_t(g)] = 1.0 / std::pow(g + 1.0, s);
  std::vector<std::int64_t> offsets{0};
  for (int g = 0; g < groups; ++g)
    offsets.push_back(g + 1 == groups ? rows : offsets.back() + std::int64_t(double(rows) * w[std::size_t(g)] / total));
  return offsets;
}

#if defined(SKEW_WITH_CUDA)
using kernels::cuda::device_alloc;
using kernels::cuda::device_copy_bandwidth;
using kernels::cuda::median_ms;
using kernels::cuda::upload;

std::vector<float> random_floats(std::size_t n, std::uint64_t stream) {
  Rng rng(7, stream);
  std::vector<float> v(n);
  for (float& x : v) x = float(rng.normal());
  return v;
}

Json bench_gate(const Sizes& s, int repeats, double bandwidth) {
  const std::size_t cells = std::size_t(s.tokens) * std::size_t(s.experts);
  const std::size_t picks = std::size_t(s.tokens) * std::size_t(s.topk);
  float* logits = upload(random_floats(cells, 1));
  float* probs = device_alloc<float>(cells);
  float* lse = device_alloc<float>(std::size_t(s.tokens));
  std::int32_t* expert = device_alloc<std::int32_t>(picks);
  float* weight = device_alloc<float>(picks);
  const double ms = median_ms(
      repeats, [&] { km::cuda::softmax_topk(int(s.tokens), s.experts, s.topk, logits, probs, lse, expert, weight); });
  // Bytes: logits read, probabilities and lse written, expert ids and weights written.
  const double bytes = double(cells) * 8.0 + double(s.tokens) * 4.0 + double(picks) * 8.0;
  for (void* p : {static_cast<void*>(logits), static_cast<void*>(probs), static_cast<void*>(lse),
                  static_cast<void*>(expert), static_cast<void*>(weight)})
    SKEW_CUDA_CHECK(cudaFree(p));
  return Json{{"ms", ms}, {"GBps", bytes / (ms * 1e-3) / 1e9}, {"of_copy_bound", bytes / (ms * 1e-3) / bandwidth}};
}

Json bench_dispatch(const Sizes& s, int repeats, double bandwidth) {
  const std::int64_t n = s.tokens * s.topk;
  std::vector<std::int32_t> keys(static_cast<std::size_t>(n));
  Rng rng(11, 0);
  // Skewed routing: expert e with probability ~ 1/(e+1) (Zipf 1), drawn by rejection-free inversion.
  const auto offsets = skewed_offsets(s.experts, 1 << 20, 1.0);
  for (auto& k : keys) {
    const auto u = std::int64_t(rng.below(1 << 20));
    k = std::int32_t(std::upper_bound(offsets.begin(), offsets.end(), u) - offsets.begin() - 1);
  }
  std::int32_t* d_keys = upload(keys);
  float* rows_in = upload(random_floats(std::size_t(n) * std::size_t(s.width), 2));
  float* rows_out = device_alloc<float>(std::size_t(n) * std::size_t(s.width));
  auto* counts = device_alloc<std::int64_t>(std::size_t(s.experts));
  auto* starts = device_alloc<std::int64_t>(std::size_t(s.experts));
  auto* pos = device_alloc<std::int64_t>(std::size_t(n));
  auto dispatch = [&] {
    km::cuda::histogram(d_keys, n, s.experts, counts);
    km::cuda::exclusive_scan(counts, s.experts, starts);
    km::cuda::stable_positions(d_keys, n, s.experts, starts, pos);
    km::cuda::scatter_rows(rows_in, pos, n, s.width, rows_out);
  };
  const double ms = median_ms(repeats, dispatch);
  const double permute_ms = median_ms(repeats, [&] { km::cuda::scatter_rows(rows_in, pos, n, s.width, rows_out); });
  // The positions must be a permutation of [0, n) (every output row written exactly once).
  std::vector<std::int64_t> host_pos(static_cast<std::size_t>(n));
  SKEW_CUDA_CHECK(cudaMemcpy(host_pos.data(), pos, host_pos.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));
  std::sort(host_pos.begin(), host_pos.end());
  for (std::int64_t i = 0; i < n; ++i)
    SKEW_CHECK(host_pos[std::size_t(i)] == i, "dispatch positions are not a permutation at " << i);
  // Fewest bytes: rows read and written once, keys read, positions written.
  const double bytes = double(n) * double(s.width) * 8.0 + double(n) * 4.0 + double(n) * 8.0;
  for (void* p : {static_cast<void*>(d_keys), static_cast<void*>(rows_in), static_cast<void*>(rows_out),
                  static_cast<void*>(counts), static_cast<void*>(starts), static_cast<void*>(pos)})
    SKEW_CUDA_CHECK(cudaFree(p));
  return Json{{"ms", ms},
              {"permute_only_ms", permute_ms},
              {"GBps", bytes / (ms * 1e-3) / 1e9},
              {"of_copy_bound", bytes / (ms * 1e-3) / bandwidth}};
}

// GELU forward and the AdamW update over `count` floats: memory-bound, so GB/s against the copy
// bound (GELU reads x and writes y: 8 bytes per element; AdamW reads w, g, m, v and writes w, m, v:
// 28 bytes).
Json bench_elementwise(std::size_t count, int repeats, double bandwidth) {
  float* x = upload(random_floats(count, 20));
  float* y = device_alloc<float>(count);
  float* g = upload(random_floats(count, 21));
  float* m = device_alloc<float>(count);
  float* v = device_alloc<float>(count);
  SKEW_CUDA_CHECK(cudaMemset(m, 0, count * sizeof(float)));
  SKEW_CUDA_CHECK(cudaMemset(v, 0, count * sizeof(float)));
  const double gelu_ms = median_ms(repeats, [&] { km::gelu_forward(Device::Cuda, count, x, y); });
  const km::AdamWStep k{1.f, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10.f, 4.5f};
  const double adamw_ms = median_ms(repeats, [&] { km::adamw_update(Device::Cuda, x, g, m, v, 0, count, true, k); });
  for (float* p : {x, y, g, m, v}) SKEW_CUDA_CHECK(cudaFree(p));
  const double gelu_bytes = 8.0 * double(count), adamw_bytes = 28.0 * double(count);
  return Json{{"count", count},
              {"gelu_ms", gelu_ms},
              {"gelu_of_copy_bound", gelu_bytes / (gelu_ms * 1e-3) / bandwidth},
              {"adamw_ms", adamw_ms},
              {"adamw_of_copy_bound", adamw_bytes / (adamw_ms * 1e-3) / bandwidth}};
}

Json bench_experts(const Sizes& s, int repeats) {
  const auto offsets = skewed_offsets(s.groups, s.gemm_rows, s.zipf);
  const std::size_t a_len = std::size_t(s.gemm_rows) * std::size_t(s.gemm_k);
  const std::size_t b_len = std::size_t(s.gemm_k) * std::size_t(s.gemm_n);
  const auto a_host = random_floats(a_len, 3), b_host = random_floats(b_len, 10);
  float* a = upload(a_host);
  std::vector<float*> b(std::size_t(s.groups));
  for (int g = 0; g < s.groups; ++g)
    b[std::size_t(g)] = g == 0 ? upload(b_host) : upload(random_floats(b_len, 10 + std::uint64_t(g)));
  float* c = device_alloc<float>(std::size_t(s.gemm_rows) * std::size_t(s.gemm_n));
  const double grouped_ms = median_ms(repeats, [&] {
    km::grouped_gemm_bf16(Device::Cuda, s.groups, offsets.data(), s.gemm_n, s.gemm_k, a, b.data(), c);
  });
  // The trainer's form: expert weights rounded to bf16 once per optimizer step (outside the
  // timing), activations rounded once per call, then one bf16 GEMM per expert.
  auto* a_bits = device_alloc<std::uint16_t>(a_len);
  std::vector<std::uint16_t*> b_bits(std::size_t(s.groups));
  for (int g = 0; g < s.groups; ++g) {
    b_bits[std::size_t(g)] = device_alloc<std::uint16_t>(b_len);
    km::to_bf16_bits(Device::Cuda, b[std::size_t(g)], std::int64_t(b_len), b_bits[std::size_t(g)]);
  }
  const std::vector<const std::uint16_t*> b_const(b_bits.begin(), b_bits.end());
  const double cached_ms = median_ms(repeats, [&] {
    km::to_bf16_bits(Device::Cuda, a, std::int64_t(a_len), a_bits);
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets.data(), s.gemm_n, s.gemm_k, a_bits, b_const.data(),
                                   c);
  });
  // Both operands already bf16 (what PyTorch's per-expert loop times): the GEMMs alone.
  const double operands_ms = median_ms(repeats, [&] {
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets.data(), s.gemm_n, s.gemm_k, a_bits, b_const.data(),
                                   c);
  });
  // Where the gap to PyTorch's per-expert loop comes from: the same loop writing bf16 outputs as
  // PyTorch's does (half the output bytes), and cuBLAS's grouped-batched call (one launch for all
  // experts; pointer arrays in device memory, sizes on the host). Either may be unsupported by a
  // cuBLAS build: that is reported, not fatal.
  Json variants = Json::object();
  {
    // The MoE layer's backward shapes on the same rows (moe_layer_experts.cpp): dx = dy W^T on the
    // cached bf16 weights (transposed), and the weight gradients dW_g += x_g^T dy_g (activations,
    // rounded inside the call); c stands in for dy.
    const std::size_t c_len = std::size_t(s.gemm_rows) * std::size_t(s.gemm_n);
    auto* dy_bits = device_alloc<std::uint16_t>(c_len);
    float* dx = device_alloc<float>(a_len);
    variants["backward_dx_ms"] = median_ms(repeats, [&] {
      km::to_bf16_bits(Device::Cuda, c, std::int64_t(c_len), dy_bits);
      km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets.data(), true, s.gemm_k, s.gemm_n, dy_bits,
                                     b_const.data(), 0.f, dx);
    });
    variants["weight_grads_ms"] = median_ms(repeats, [&] {
      km::grouped_gemm_weight_grads(Device::Cuda, true, s.groups, offsets.data(), s.gemm_k, s.gemm_n, a, c, b.data());
    });
    SKEW_CUDA_CHECK(cudaFree(dy_bits));
    SKEW_CUDA_CHECK(cudaFree(dx));
  }
  {
    auto* c16 = device_alloc<__nv_bfloat16>(std::size_t(s.gemm_rows) * std::size_t(s.gemm_n));
    variants["bf16_out_ms"] = median_ms(repeats, [&] {
      for (int g = 0; g < s.groups; ++g) {
        const int rows = int(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]);
        if (rows == 0) continue;
        const float one = 1.f, zero = 0.f;
        SKEW_CUBLAS_CHECK(cublasGemmEx(kernels::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, s.gemm_n, rows,
                                       s.gemm_k, &one, b_const[std::size_t(g)], CUDA_R_16BF, s.gemm_n,
                                       a_bits + offsets[std::size_t(g)] * s.gemm_k, CUDA_R_16BF, s.gemm_k, &zero,
                                       c16 + offsets[std::size_t(g)] * s.gemm_n, CUDA_R_16BF, s.gemm_n,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      }
    });
    SKEW_CUDA_CHECK(cudaFree(c16));
    std::vector<const void*> a_ptrs, b_ptrs;
    std::vector<void*> c_ptrs;
    std::vector<int> m_sizes, n_sizes, k_sizes, lda, ldb, ldc, group_size;
    std::vector<cublasOperation_t> ops;
    std::vector<float> alphas, betas;
    for (int g = 0; g < s.groups; ++g) {
      const int rows = int(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]);
      if (rows == 0) continue;
      a_ptrs.push_back(a_bits + offsets[std::size_t(g)] * s.gemm_k);
      b_ptrs.push_back(b_const[std::size_t(g)]);
      c_ptrs.push_back(c + offsets[std::size_t(g)] * s.gemm_n);
      m_sizes.push_back(s.gemm_n), n_sizes.push_back(rows), k_sizes.push_back(s.gemm_k);
      lda.push_back(s.gemm_n), ldb.push_back(s.gemm_k), ldc.push_back(s.gemm_n);
      group_size.push_back(1), ops.push_back(CUBLAS_OP_N), alphas.push_back(1.f), betas.push_back(0.f);
    }
    const auto* d_a = upload(std::vector<const void*>(b_ptrs));  // column-major: B^T is the first operand
    const auto* d_b = upload(std::vector<const void*>(a_ptrs));
    auto* d_c = upload(c_ptrs);
    // Same product as the loop of cublasGemmEx above: compare before trusting its time.
    const auto read_c = [&] {
      std::vector<float> host(std::size_t(s.gemm_rows) * std::size_t(s.gemm_n));
      SKEW_CUDA_CHECK(cudaMemcpy(host.data(), c, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
      return host;
    };
    km::grouped_gemm_bf16_operands(Device::Cuda, s.groups, offsets.data(), s.gemm_n, s.gemm_k, a_bits, b_const.data(),
                                   c);
    const std::vector<float> loop_c = read_c();
    try {
      SKEW_CUDA_CHECK(cudaMemset(c, 0xff, loop_c.size() * sizeof(float)));  // NaN: unwritten outputs show
      variants["grouped_batched_ms"] = median_ms(repeats, [&] {
        SKEW_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
            kernels::cuda::cublas_handle(), ops.data(), ops.data(), m_sizes.data(), n_sizes.data(), k_sizes.data(),
            alphas.data(), d_a, CUDA_R_16BF, lda.data(), d_b, CUDA_R_16BF, ldb.data(), betas.data(), d_c, CUDA_R_32F,
            ldc.data(), int(group_size.size()), group_size.data(), CUBLAS_COMPUTE_32F));
      });
      const std::vector<float> grouped_c = read_c();
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < loop_c.size(); ++i) {
        diff += (double(grouped_c[i]) - loop_c[i]) * (double(grouped_c[i]) - loop_c[i]);
        norm += double(loop_c[i]) * loop_c[i];
      }
      variants["grouped_batched_rel_l2"] = std::sqrt(diff / norm);  // NaN if any output was left unwritten
    } catch (const Error& e) {
      variants["grouped_batched_error"] = e.what();
    }
    for (const void* p : {static_cast<const void*>(d_a), static_cast<const void*>(d_b), static_cast<const void*>(d_c)})
      SKEW_CUDA_CHECK(cudaFree(const_cast<void*>(p)));
  }
  // Baseline: one bf16 GEMM of the same total shape, operands converted once beforehand.
  std::vector<__nv_bfloat16> a16(a_len), b16(b_len);
  for (std::size_t i = 0; i < a_len; ++i) a16[i] = __float2bfloat16(a_host[i]);
  for (std::size_t i = 0; i < b_len; ++i) b16[i] = __float2bfloat16(b_host[i]);
  __nv_bfloat16* da16 = upload(a16);
  __nv_bfloat16* db16 = upload(b16);
  cublasHandle_t handle;
  SKEW_CUBLAS_CHECK(cublasCreate(&handle));
  const float alpha = 1.f, beta = 0.f;
  const double large_ms = median_ms(repeats, [&] {
    SKEW_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, s.gemm_n, int(s.gemm_rows), s.gemm_k, &alpha, db16,
                                   CUDA_R_16BF, s.gemm_n, da16, CUDA_R_16BF, s.gemm_k, &beta, c, CUDA_R_32F, s.gemm_n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  SKEW_CUBLAS_CHECK(cublasDestroy(handle));
  const double flops = 2.0 * double(s.gemm_rows) * s.gemm_n * s.gemm_k;
  SKEW_CUDA_CHECK(cudaFree(a));
  for (float* p : b) SKEW_CUDA_CHECK(cudaFree(p));
  SKEW_CUDA_CHECK(cudaFree(c));
  SKEW_CUDA_CHECK(cudaFree(da16));
  SKEW_CUDA_CHECK(cudaFree(db16));
  SKEW_CUDA_CHECK(cudaFree(a_bits));
  for (std::uint16_t* p : b_bits) SKEW_CUDA_CHECK(cudaFree(p));
  for (const char* key : {"bf16_out", "grouped_batched", "backward_dx", "weight_grads"})
    if (variants.contains(std::string(key) + "_ms"))
      variants[std::string(key) + "_TFLOPs"] = flops / (variants[std::string(key) + "_ms"].get<double>() * 1e-3) / 1e12;
  Json sizes = Json::array();
  for (int g = 0; g < s.groups; ++g) sizes.push_back(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]);
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
#endif

}  // namespace

int main(int argc, char** argv) {
  Schema schema("moe_gpu_bench", "CUDA MoE gate, dispatch and grouped bf16 expert GEMM against their bounds.");
  schema.add_int("bench.tokens", 65536, {1, 1 << 24}, "tokens per step");
  schema.add_int("bench.experts", 64, {1, 1 << 16}, "experts (gate columns, dispatch bins)");
  schema.add_int("bench.topk", 2, {1, 64}, "experts per token");
  schema.add_int("bench.width", 1024, {1, 1 << 16}, "floats per dispatched row (model dimension)");
  schema.add_int("bench.groups", 8, {1, 1 << 16}, "local experts in the grouped GEMM");
  schema.add_int("bench.gemm_rows", 32768, {1, 1 << 24}, "total rows of the grouped GEMM");
  schema.add_int("bench.gemm_k", 2048, {1, 1 << 16}, "GEMM inner dimension (model dimension)");
  schema.add_int("bench.gemm_n", 8192, {1, 1 << 16}, "GEMM output columns (FFN dimension)");
  schema.add_float("bench.zipf", 1.0, FloatRange::at_least(0), "skew of the group sizes (Zipf exponent)");
  schema.add_int("bench.batch", 8, {1, 1 << 16}, "sequences per step (row-wise kernels: rows = batch x seq)");
  schema.add_int("bench.seq", 1024, {1, 1 << 16}, "sequence length (row-wise kernels; scores are seq x seq)");
  schema.add_int("bench.heads", 16, {1, 1 << 10}, "attention heads (causal softmax rows = batch x heads x seq)");
  schema.add_int("bench.vocab", 256, {1, 1 << 24}, "vocabulary (cross-entropy columns, embedding rows)");
  schema.add_int("bench.grad_norm_params", 1 << 26, {1, kMaxInt32}, "floats in the gradient-norm vector");
  schema.add_int("bench.repeats", 20, {1, 1000}, "timed runs per kernel (median reported)");
  schema.add_choice("bench.rows", "all", {"all", "kernels", "model"},
                    "kernels: gate to experts; model: the whole GPT-MoE step (bench.model_*); all: both");
  bench::add_model_bench_keys(schema);
  return comm::run_main(argc, argv, false, [&](comm::Runtime& rt) {
    const Config c = Config::parse(schema, argc, argv);
    if (c.answer_help_or_print(std::cout, true)) return 0;
    const Sizes s{
        c.get_int("bench.tokens"),         c.get_int_as<int>("bench.experts"), c.get_int_as<int>("bench.topk"),
        c.get_int_as<int>("bench.width"),  c.get_int_as<int>("bench.groups"),  c.get_int_as<int>("bench.gemm_n"),
        c.get_int_as<int>("bench.gemm_k"), c.get_int("bench.gemm_rows"),       c.get_float("bench.zipf")};
    SKEW_CHECK(s.topk <= s.experts, "bench.topk " << s.topk << " is more than bench.experts " << s.experts);
    SKEW_CHECK(s.gemm_rows >= s.groups, "bench.gemm_rows " << s.gemm_rows << " is less than bench.groups " << s.groups);
    Json summary{{"tokens", s.tokens}, {"experts", s.experts},     {"topk", s.topk},     {"width", s.width},
                 {"groups", s.groups}, {"gemm_rows", s.gemm_rows}, {"gemm_k", s.gemm_k}, {"gemm_n", s.gemm_n}};
    Json sizes = Json::array();
    const auto offsets = skewed_offsets(s.groups, s.gemm_rows, s.zipf);
    for (int g = 0; g < s.groups; ++g) sizes.push_back(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]);
    summary["group_rows"] = sizes;
    const std::string rows = c.get_string("bench.rows");
    const bench::ModelBenchShape model = bench::model_bench_shape(c);
    if (rows != "kernels") summary["model_shape"] = bench::model_bench_shape_json(model);
    if (rows == "model" && model.device == "cpu") {  // the row's dry run on the host
      summary["model"] = bench::bench_gpt_moe_model(model, *rt.world);
      print_summary(summary);
      return 0;
    }
    if (cuda_device_count() == 0) {
      std::cout << "moe_gpu_bench: SKIPPED: no CUDA device (this build " << (cuda_built() ? "has" : "lacks")
                << " CUDA)\n";
      summary["skipped"] = true;
      print_summary(summary);
      return 0;
    }
#if defined(SKEW_WITH_CUDA)
    comm::bind_local_gpu(rt);
    if (rows != "kernels") summary["model"] = bench::bench_gpt_moe_model(model, *rt.world);
    if (rows == "model") {
      print_summary(summary);
      return 0;
    }
    const int repeats = c.get_int_as<int>("bench.repeats");
    const double bandwidth = device_copy_bandwidth(std::size_t(1) << 30, repeats);
    summary["copy_GBps"] = bandwidth / 1e9;
    summary["gate"] = bench_gate(s, repeats, bandwidth);
    summary["dispatch"] = bench_dispatch(s, repeats, bandwidth);
    summary["experts"] = bench_experts(s, repeats);
    summary["elementwise"] = bench_elementwise(std::size_t(1) << 26, repeats, bandwidth);
    const bench::RowwiseSizes rowwise{c.get_int_as<int>("bench.batch"),
                                      c.get_int_as<int>("bench.seq"),
                                      s.width,
                                      c.get_int_as<int>("bench.heads"),
                                      c.get_int_as<int>("bench.vocab"),
                                      c.get_int_as<std::size_t>("bench.grad_norm_params")};
    SKEW_CHECK(std::int64_t(rowwise.batch) * rowwise.seq <= kMaxInt32,
               "bench.batch x bench.seq = " << std::int64_t(rowwise.batch) * rowwise.seq << " rows, more than 2^31-1");
    summary["rowwise"] = bench::bench_rowwise(rowwise, repeats, bandwidth);
    SKEW_CHECK(s.width % rowwise.heads == 0,
               "bench.width " << s.width << " is not a multiple of bench.heads " << rowwise.heads);
    skew::moe::DenseBlockShape block;
    block.d = s.width, block.heads = rowwise.heads, block.seq = rowwise.seq, block.batch = rowwise.batch;
    block.vocab = rowwise.vocab, block.d_ff = 4 * s.width;
    summary["dense_block"] = bench::bench_dense_block(block, repeats);
    SKEW_INFO("copy " << bandwidth / 1e9 << " GB/s; gate " << summary["gate"]["GBps"].get<double>()
                      << " GB/s; dispatch " << summary["dispatch"]["GBps"].get<double>() << " GB/s ("
                      << 100 * summary["dispatch"]["of_copy_bound"].get<double>() << "% of copy); grouped bf16 GEMM "
                      << summary["experts"]["grouped_TFLOPs"].get<double>()
                      << " TFLOP/s (weights kept in bf16: " << summary["experts"]["cached_weights_TFLOPs"].get<double>()
                      << ", bf16 operands: " << summary["experts"]["bf16_operands_TFLOPs"].get<double>()
                      << ") vs one GEMM " << summary["experts"]["one_gemm_TFLOPs"].get<double>() << " TFLOP/s");
#endif
    print_summary(summary);
    return 0;
  });
}
