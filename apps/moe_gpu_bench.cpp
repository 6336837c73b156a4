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
//             (apps/moe_gpu_bench_experts.hpp)
//   GPT-MoE model step  issue 19's whole model through moe_train's Session on the GPU: tokens/s,
//             the step's split and the expert GEMMs' TFLOP/s (apps/moe_gpu_bench_model.hpp)
// bench.rows picks the kernel rows, the model row or both; bench.model_device=cpu dry-runs the
// model row on the host.
// scripts/device/torch_moe.py (kernels) and torch_gpt_moe.py (model) time PyTorch's equivalents. Without a GPU (or
// in a build without CUDA) it prints a SKIPPED line and the sizes it would use.
#include <cstdint>
#include <iostream>

#include "apps/bench/harness.hpp"
#include "apps/bench/machine.hpp"
#include "apps/moe_gpu_bench_model.hpp"
#include "apps/moe_gpu_bench_options.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "mpi/runtime.hpp"

#if defined(SKEW_WITH_CUDA)
#include "apps/moe_gpu_bench_block.hpp"
#include "apps/moe_gpu_bench_experts.hpp"
#include "apps/moe_gpu_bench_kernels.hpp"
#include "apps/moe_gpu_bench_rowwise.hpp"
#include "kernels/cuda_timing.hpp"
#endif

using namespace skew;
using namespace skew::bench;

namespace {

// The summary's head: the kernel rows' sizes, the expert groups' rows, the model row's shape.
Json shape_summary(const MoeGpuBenchOptions& o) {
  const Sizes& s = o.sizes;
  Json summary{{"tokens", s.tokens}, {"experts", s.experts},     {"topk", s.topk},     {"width", s.width},
               {"groups", s.groups}, {"gemm_rows", s.gemm_rows}, {"gemm_k", s.gemm_k}, {"gemm_n", s.gemm_n}};
  Json sizes = Json::array();
  const auto offsets = skewed_offsets(s.groups, s.gemm_rows, s.zipf);
  for (int g = 0; g < s.groups; ++g) sizes.push_back(offsets[std::size_t(g) + 1] - offsets[std::size_t(g)]);
  summary["group_rows"] = sizes;
  if (o.rows != "kernels") summary["model_shape"] = model_bench_shape_json(o.model);
  return summary;
}

#if defined(SKEW_WITH_CUDA)
// The kernel rows, gate to the dense block, into `summary`.
void bench_kernel_rows(const MoeGpuBenchOptions& o, Json& summary) {
  const Sizes& s = o.sizes;
  const int repeats = o.repeats;
  const double bandwidth = kernels::cuda::device_copy_bandwidth(std::size_t(1) << 30, repeats);
  summary["copy_GBps"] = bandwidth / 1e9;
  summary["gate"] = bench_gate(s, repeats, bandwidth);
  summary["dispatch"] = bench_dispatch(s, repeats, bandwidth);
  summary["experts"] = bench_experts(s, repeats);
  summary["elementwise"] = bench_elementwise(std::size_t(1) << 26, repeats, bandwidth);
  const RowwiseSizes& rowwise = o.rowwise;
  SKEW_CHECK(std::int64_t(rowwise.batch) * rowwise.seq <= kMaxInt32,
             "bench.batch x bench.seq = " << std::int64_t(rowwise.batch) * rowwise.seq << " rows, more than 2^31-1");
  summary["rowwise"] = bench_rowwise(rowwise, repeats, bandwidth);
  SKEW_CHECK(s.width % rowwise.heads == 0,
             "bench.width " << s.width << " is not a multiple of bench.heads " << rowwise.heads);
  skew::moe::DenseBlockShape block;
  block.d = s.width, block.heads = rowwise.heads, block.seq = rowwise.seq, block.batch = rowwise.batch;
  block.vocab = rowwise.vocab, block.d_ff = 4 * s.width;
  summary["dense_block"] = bench_dense_block(block, repeats);
  SKEW_INFO("copy " << bandwidth / 1e9 << " GB/s; gate " << summary["gate"]["GBps"].get<double>() << " GB/s; dispatch "
                    << summary["dispatch"]["GBps"].get<double>() << " GB/s ("
                    << 100 * summary["dispatch"]["of_copy_bound"].get<double>() << "% of copy); grouped bf16 GEMM "
                    << summary["experts"]["grouped_TFLOPs"].get<double>()
                    << " TFLOP/s (weights kept in bf16: " << summary["experts"]["cached_weights_TFLOPs"].get<double>()
                    << ", bf16 operands: " << summary["experts"]["bf16_operands_TFLOPs"].get<double>()
                    << ") vs one GEMM " << summary["experts"]["one_gemm_TFLOPs"].get<double>() << " TFLOP/s");
}
#endif

// The rows bench.rows asks for; without a GPU, a SKIPPED line (bar the model row's host dry run).
int run(const MoeGpuBenchOptions& o, comm::Runtime& rt) {
  Json summary = shape_summary(o);
  summary["machine"] = bench::machine_json(bench::this_machine());
  if (o.rows == "model" && o.model.device == "cpu") {  // the row's dry run on the host
    summary["model"] = bench_gpt_moe_model(o.model, *rt.world);
    print_summary(summary);
    return 0;
  }
  if (skipped_without_gpu("moe_gpu_bench", "", summary)) return 0;
  bench::print_machine_header(1);  // one host thread drives the GPU
#if defined(SKEW_WITH_CUDA)
  comm::bind_local_gpu(rt);
  if (o.rows != "kernels") summary["model"] = bench_gpt_moe_model(o.model, *rt.world);
  if (o.rows != "model") bench_kernel_rows(o, summary);
#endif
  print_summary(summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, moe_gpu_bench_schema(), false, HelpFrom::EveryRank,
                         [](const Config& c, comm::Runtime& rt) { return run(read_moe_gpu_bench_options(c), rt); });
}
