// moe_gpu_bench's "dense GPT block fwd+bwd" row (CUDA builds only; included by
// apps/moe_gpu_bench.cpp): one dense GPT block (lib/moe/dense_block.hpp: embedding, layernorm,
// qkv, causal attention, projection, residual, layernorm, GELU FFN of 4 d, residual, final
// layernorm, vocab linear, cross-entropy, the whole backward and the gradients' sum of squares)
// through lib/moe/ops with Device::Cuda buffers allocated once, timed per step (median of
// repeats) in fp32 and with bf16 GEMM inputs. Reported: tokens/s and the step's GEMM FLOPs per
// second (3x the forward's: the backward has two GEMMs per forward one). The step includes what
// the ops do today: the per-row losses and each gradient's sum of squares come back to the host.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cstdint>

#include "core/metrics.hpp"
#include "kernels/cuda_timing.hpp"
#include "lib/moe/dense_block.hpp"

namespace skew::bench {

inline Json bench_dense_block(const moe::DenseBlockShape& shape, int repeats) {
  const moe::DenseBlockInputs inputs = moe::random_dense_block_inputs(shape, 1);
  moe::DenseBlockBuffers<float> buffers(Device::Cuda);
  moe::upload_dense_block(inputs, buffers);
  const double n = shape.tokens(), d = shape.d, f = shape.d_ff, v = shape.vocab, seq = shape.seq;
  // Forward GEMMs: the four linears (qkv, projection, FFN in and out, vocab) and attention's two
  // per head (scores and probs x v: 2 * seq * seq * head_dim each, summed over heads: d).
  const double forward_flops = 2 * n * (d * 3 * d + d * d + 2 * d * f + d * v) + 2 * 2 * n * seq * d;
  Json out{{"shape",
            {{"batch", shape.batch},
             {"seq", shape.seq},
             {"d", shape.d},
             {"heads", shape.heads},
             {"d_ff", shape.d_ff},
             {"vocab", shape.vocab}}}};
  for (const auto& [name, precision] :
       {std::pair{"fp32", moe::Precision::Fp32}, std::pair{"bf16", moe::Precision::Bf16}}) {
    double loss = 0;
    const double ms = kernels::cuda::median_ms(
        repeats, [&] { loss = moe::dense_block_step(shape, buffers, Device::Cuda, precision).loss; });
    out[name] = {{"ms", ms},
                 {"tokens_per_s", n / (ms * 1e-3)},
                 {"gemm_TFLOPs", 3 * forward_flops / (ms * 1e-3) / 1e12},
                 {"loss", loss}};
  }
  return out;
}

}  // namespace skew::bench
#endif
