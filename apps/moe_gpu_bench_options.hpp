// moe_gpu_bench's keys and the one place where its Config becomes typed options (included by
// apps/moe_gpu_bench.cpp; the rows' headers take the structs defined here).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace skew::bench {

// The kernel rows' sizes: gate and dispatch (tokens, experts, topk, width) and the grouped GEMM.
struct Sizes {
  std::int64_t tokens;
  int experts, topk, width, groups, gemm_n, gemm_k;
  std::int64_t gemm_rows;
  double zipf;
};

// The row-wise kernels' shape (apps/moe_gpu_bench_rowwise.hpp).
struct RowwiseSizes {
  int batch, seq, d, heads, vocab;
  std::size_t squares;  // elements of the gradient-norm vector
};

// The GPT-MoE model row's shape (apps/moe_gpu_bench_model.hpp).
struct ModelBenchShape {
  int d_model, heads, layers, experts, top_k, d_ff, seq, batch, steps;
  std::string device;  // moe_train's train.device: cuda, or cpu for a dry run of the row
};

struct MoeGpuBenchOptions {
  Sizes sizes;
  RowwiseSizes rowwise;
  ModelBenchShape model;
  int repeats;
  std::string rows;  // all | kernels | model
};

// Rows per expert group drawn from a Zipf law (expert g gets weight 1/(g+1)^s): the skew the
// grouped GEMM must cope with. Offsets sum to `rows`.
inline std::vector<std::int64_t> skewed_offsets(int groups, std::int64_t rows, double s) {
  std::vector<double> w(static_cast<std::size_t>(groups));
  double total = 0;
  for (int g = 0; g < groups; ++g) total += w[std::size_t(g)] = 1.0 / std::pow(g + 1.0, s);
  std::vector<std::int64_t> offsets{0};
  for (int g = 0; g < groups; ++g)
    offsets.push_back(g + 1 == groups ? rows : offsets.back() + std::int64_t(double(rows) * w[std::size_t(g)] / total));
  return offsets;
}

// The model row's keys; the width, heads and sequence length are the kernel rows' bench.width,
// bench.heads and bench.seq.
inline void add_model_bench_keys(Schema& schema) {
  schema.add_int("bench.model_layers", 8, {1, 1 << 10}, "model row: transformer blocks (each FFN an MoE)");
  schema.add_int("bench.model_experts", 16, {1, 1 << 16}, "model row: experts per MoE layer");
  schema.add_int("bench.model_d_ff", 4096, {1, 1 << 20}, "model row: hidden width of each expert");
  schema.add_int("bench.model_batch", 8, {1, 1 << 16}, "model row: sequences per step (of bench.seq tokens)");
  schema.add_int("bench.model_steps", 5, {1, 1000}, "model row: timed steps after one warm-up (median reported)");
  schema.add_choice("bench.model_device", "cuda", {"cuda", "cpu"},
                    "model row: cuda (skipped without a GPU), or cpu: a dry run of the row on the host at small "
                    "sizes (its figures are not the GPU's)");
}

inline Schema moe_gpu_bench_schema() {
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
  add_model_bench_keys(schema);
  return schema;
}

inline MoeGpuBenchOptions read_moe_gpu_bench_options(const Config& c) {
  const Sizes s{
      c.get_int("bench.tokens"),         c.get_int_as<int>("bench.experts"), c.get_int_as<int>("bench.topk"),
      c.get_int_as<int>("bench.width"),  c.get_int_as<int>("bench.groups"),  c.get_int_as<int>("bench.gemm_n"),
      c.get_int_as<int>("bench.gemm_k"), c.get_int("bench.gemm_rows"),       c.get_float("bench.zipf")};
  SKEW_CHECK(s.topk <= s.experts, "bench.topk " << s.topk << " is more than bench.experts " << s.experts);
  SKEW_CHECK(s.gemm_rows >= s.groups, "bench.gemm_rows " << s.gemm_rows << " is less than bench.groups " << s.groups);
  const RowwiseSizes rowwise{c.get_int_as<int>("bench.batch"),
                             c.get_int_as<int>("bench.seq"),
                             s.width,
                             c.get_int_as<int>("bench.heads"),
                             c.get_int_as<int>("bench.vocab"),
                             c.get_int_as<std::size_t>("bench.grad_norm_params")};
  const ModelBenchShape model{c.get_int_as<int>("bench.width"),        c.get_int_as<int>("bench.heads"),
                              c.get_int_as<int>("bench.model_layers"), c.get_int_as<int>("bench.model_experts"),
                              c.get_int_as<int>("bench.topk"),         c.get_int_as<int>("bench.model_d_ff"),
                              c.get_int_as<int>("bench.seq"),          c.get_int_as<int>("bench.model_batch"),
                              c.get_int_as<int>("bench.model_steps"),  c.get_string("bench.model_device")};
  return {s, rowwise, model, c.get_int_as<int>("bench.repeats"), c.get_string("bench.rows")};
}

}  // namespace skew::bench
