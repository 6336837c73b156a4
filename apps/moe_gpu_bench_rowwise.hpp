// moe_gpu_bench's row-wise section (CUDA builds only; included by apps/moe_gpu_bench.cpp): the
// kernels of kernels/moe_rowwise.hpp at the shape of a GPT-MoE step (rows = batch x seq tokens
// of width d; attention scores [batch x heads, seq, seq]; a byte-level vocabulary), each timed
// (median of repeats) against its memory bound: the fewest bytes the op must move, at the H200's
// 4.8 TB/s HBM3e peak and at the measured device copy bandwidth.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "apps/bench/device_operand.hpp"
#include "apps/moe_gpu_bench_options.hpp"
#include "core/metrics.hpp"
#include "core/rng.hpp"
#include "kernels/cuda_timing.hpp"
#include "kernels/moe_rowwise.hpp"

namespace skew::bench {

constexpr double kH200PeakBytesPerSecond = 4.8e12;

// One kernel's row: milliseconds, the bytes it must move at least, and the two bounds' shares.
inline Json rowwise_entry(double ms, double bytes, double copy_bandwidth) {
  const double rate = bytes / (ms * 1e-3);
  return Json{{"ms", ms},
              {"MB", bytes / 1e6},
              {"GBps", rate / 1e9},
              {"bound_ms", bytes / kH200PeakBytesPerSecond * 1e3},
              {"of_peak", rate / kH200PeakBytesPerSecond},
              {"of_copy_bound", rate / copy_bandwidth}};
}

inline DeviceOperand<float> random_device_floats(std::size_t n, std::uint64_t stream, float scale = 1.0f) {
  Rng rng(11, stream);
  std::vector<float> v(n);
  for (float& x : v) x = scale * static_cast<float>(rng.normal());
  return DeviceOperand<float>(v);
}

inline DeviceOperand<std::int32_t> random_device_ids(std::size_t n, int bound, std::uint64_t stream) {
  Rng rng(13, stream);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(bound)));
  return DeviceOperand<std::int32_t>(v);
}

// layernorm: x and y once each forward; x, dy and dx backward (g, b, dg, db, mean, rstd: rows
// or columns, counted too). embedding: the output written once, each table row read once (vocab
// + seq rows), the tokens; backward: dout read, each table row read and written once.
inline void bench_layernorm_embedding(const RowwiseSizes& s, int repeats, double copy_bandwidth, Json& out) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  const int n = s.batch * s.seq;
  const double nd = double(n) * s.d, f = sizeof(float);
  const DeviceOperand<float> x = random_device_floats(std::size_t(nd), 1, 2.0f), y{std::size_t(nd)};
  const DeviceOperand<float> g = random_device_floats(s.d, 2), b = random_device_floats(s.d, 3);
  const DeviceOperand<float> mean(n), rstd(n);
  const DeviceOperand<float> dy = random_device_floats(std::size_t(nd), 4), dx{std::size_t(nd)};
  const DeviceOperand<float> dg = random_device_floats(s.d, 5), db = random_device_floats(s.d, 6);
  out["layernorm_fwd"] =
      rowwise_entry(median_ms(repeats, [&] { km::layernorm_forward(Device::Cuda, n, s.d, x, g, b, y, mean, rstd); }),
                    f * (2 * nd + 2.0 * s.d + 2.0 * n), copy_bandwidth);
  out["layernorm_bwd"] = rowwise_entry(
      median_ms(repeats, [&] { km::layernorm_backward(Device::Cuda, n, s.d, x, g, mean, rstd, dy, dx, dg, db); }),
      f * (3 * nd + 5.0 * s.d + 2.0 * n), copy_bandwidth);

  const DeviceOperand<std::int32_t> tokens = random_device_ids(n, s.vocab, 7);
  const DeviceOperand<float> wte = random_device_floats(std::size_t(s.vocab) * s.d, 8),
                             wpe = random_device_floats(std::size_t(s.seq) * s.d, 9);
  const double tables = double(s.vocab + s.seq) * s.d;
  out["embedding_fwd"] = rowwise_entry(
      median_ms(repeats, [&] { km::embedding_forward(Device::Cuda, n, s.d, s.seq, tokens, wte, wpe, y); }),
      f * (nd + tables + n), copy_bandwidth);
  out["embedding_bwd"] = rowwise_entry(
      median_ms(repeats, [&] { km::embedding_backward(Device::Cuda, n, s.d, s.seq, tokens, dy, wte, wpe); }),
      f * (nd + 2 * tables + n), copy_bandwidth);
}

// causal softmax over [batch x heads, seq, seq]: the lower triangle read, every entry written
// (the zeros above the diagonal feed the probs x V GEMM); backward reads probs and dprobs on
// the triangle and writes every entry.
inline void bench_causal_softmax(const RowwiseSizes& s, int repeats, double copy_bandwidth, Json& out) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  const double f = sizeof(float);
  const std::size_t rows = std::size_t(s.batch) * s.heads * s.seq;
  const double full = double(rows) * s.seq, triangle = double(s.batch) * s.heads * s.seq * (s.seq + 1.0) / 2;
  const DeviceOperand<float> scores = random_device_floats(rows * s.seq, 10, 3.0f),
                             grad = random_device_floats(rows * s.seq, 11);
  out["softmax_fwd"] =
      rowwise_entry(median_ms(repeats, [&] { km::attention_softmax_forward(Device::Cuda, rows, s.seq, true, scores); }),
                    f * (triangle + full), copy_bandwidth);
  out["softmax_bwd"] = rowwise_entry(
      median_ms(repeats,
                [&] { km::attention_softmax_backward(Device::Cuda, rows, s.seq, true, scores, grad, 0.125f); }),
      f * (2 * triangle + full), copy_bandwidth);
}

// cross-entropy: logits read, dlogits written, targets read, per-row fp64 losses written. Sum of
// squares (the gradient norm): the vector read once; the time includes reading the scalar back
// (the step needs it on the host for the clip scale and the log).
inline void bench_loss_and_norm(const RowwiseSizes& s, int repeats, double copy_bandwidth, Json& out) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  const int n = s.batch * s.seq;
  const double f = sizeof(float), nv = double(n) * s.vocab;
  const DeviceOperand<float> logits = random_device_floats(std::size_t(nv), 12, 3.0f), dlogits{std::size_t(nv)};
  const DeviceOperand<double> row_loss(n);
  const DeviceOperand<std::int32_t> targets = random_device_ids(n, s.vocab, 13);
  out["cross_entropy"] = rowwise_entry(
      median_ms(repeats,
                [&] { km::cross_entropy(Device::Cuda, n, s.vocab, logits, targets, 1.0f / n, dlogits, row_loss); }),
      f * (2 * nv + n) + sizeof(double) * double(n), copy_bandwidth);

  const DeviceOperand<float> grads = random_device_floats(s.squares, 14, 1e-2f);
  out["grad_norm"] =
      rowwise_entry(median_ms(repeats, [&] { (void)km::sum_of_squares(Device::Cuda, s.squares, grads); }),
                    f * double(s.squares), copy_bandwidth);
}

inline Json bench_rowwise(const RowwiseSizes& s, int repeats, double copy_bandwidth) {
  Json out = Json::object();
  out["shape"] = Json{{"rows", s.batch * s.seq}, {"d", s.d},         {"seq", s.seq},
                      {"heads", s.heads},        {"vocab", s.vocab}, {"squares", s.squares}};
  bench_layernorm_embedding(s, repeats, copy_bandwidth, out);
  bench_causal_softmax(s, repeats, copy_bandwidth, out);
  bench_loss_and_norm(s, repeats, copy_bandwidth, out);
  return out;
}

}  // namespace skew::bench
#endif
