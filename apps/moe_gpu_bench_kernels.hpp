// moe_gpu_bench's gate, dispatch and element-wise rows (CUDA builds only; included by
// apps/moe_gpu_bench.cpp), each timed with CUDA events (median of repeats) against the device
// copy bound for the fewest bytes it must move.
#pragma once
#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "apps/bench/device_operand.hpp"
#include "apps/moe_gpu_bench_options.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/rng.hpp"
#include "kernels/cuda_timing.hpp"
#include "kernels/moe_dispatch.hpp"
#include "kernels/moe_elementwise.hpp"
#include "kernels/moe_gate.hpp"

namespace skew::bench {

inline std::vector<float> random_floats(std::size_t n, std::uint64_t stream) {
  Rng rng(7, stream);
  std::vector<float> v(n);
  for (float& x : v) x = float(rng.normal());
  return v;
}

inline Json bench_gate(const Sizes& s, int repeats, double bandwidth) {
  namespace km = kernels::moe;
  const std::size_t cells = std::size_t(s.tokens) * std::size_t(s.experts);
  const std::size_t picks = std::size_t(s.tokens) * std::size_t(s.topk);
  const DeviceOperand<float> logits(random_floats(cells, 1)), probs(cells), lse{std::size_t(s.tokens)};
  const DeviceOperand<std::int32_t> expert(picks);
  const DeviceOperand<float> weight(picks);
  const double ms = kernels::cuda::median_ms(
      repeats, [&] { km::cuda::softmax_topk(int(s.tokens), s.experts, s.topk, logits, probs, lse, expert, weight); });
  // Bytes: logits read, probabilities and lse written, expert ids and weights written.
  const double bytes = double(cells) * 8.0 + double(s.tokens) * 4.0 + double(picks) * 8.0;
  return Json{{"ms", ms}, {"GBps", bytes / (ms * 1e-3) / 1e9}, {"of_copy_bound", bytes / (ms * 1e-3) / bandwidth}};
}

// Skewed routing of `n` assignments: expert e with probability ~ 1/(e+1) (Zipf 1), drawn by
// rejection-free inversion.
inline std::vector<std::int32_t> skewed_expert_keys(std::int64_t n, int experts) {
  std::vector<std::int32_t> keys(static_cast<std::size_t>(n));
  Rng rng(11, 0);
  const auto offsets = skewed_offsets(experts, 1 << 20, 1.0);
  for (auto& k : keys) {
    const auto u = std::int64_t(rng.below(1 << 20));
    k = std::int32_t(std::upper_bound(offsets.begin(), offsets.end(), u) - offsets.begin() - 1);
  }
  return keys;
}

// Checks that the positions are a permutation of [0, n) (every output row written exactly once).
inline void check_permutation(const std::int64_t* device_positions, std::int64_t n) {
  std::vector<std::int64_t> host_pos(static_cast<std::size_t>(n));
  SKEW_CUDA_CHECK(
      cudaMemcpy(host_pos.data(), device_positions, host_pos.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));
  std::sort(host_pos.begin(), host_pos.end());
  for (std::int64_t i = 0; i < n; ++i)
    SKEW_CHECK(host_pos[std::size_t(i)] == i, "dispatch positions are not a permutation at " << i);
}

inline Json bench_dispatch(const Sizes& s, int repeats, double bandwidth) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  const std::int64_t n = s.tokens * s.topk;
  const DeviceOperand<std::int32_t> keys(skewed_expert_keys(n, s.experts));
  const DeviceOperand<float> rows_in(random_floats(std::size_t(n) * std::size_t(s.width), 2));
  const DeviceOperand<float> rows_out{std::size_t(n) * std::size_t(s.width)};
  const DeviceOperand<std::int64_t> counts{std::size_t(s.experts)}, starts{std::size_t(s.experts)}, pos{std::size_t(n)};
  auto dispatch = [&] {
    km::cuda::histogram(keys, n, s.experts, counts);
    km::cuda::exclusive_scan(counts, s.experts, starts);
    km::cuda::stable_positions(keys, n, s.experts, starts, pos);
    km::cuda::scatter_rows(rows_in, pos, n, s.width, rows_out);
  };
  const double ms = median_ms(repeats, dispatch);
  const double permute_ms = median_ms(repeats, [&] { km::cuda::scatter_rows(rows_in, pos, n, s.width, rows_out); });
  check_permutation(pos, n);
  // Fewest bytes: rows read and written once, keys read, positions written.
  const double bytes = double(n) * double(s.width) * 8.0 + double(n) * 4.0 + double(n) * 8.0;
  return Json{{"ms", ms},
              {"permute_only_ms", permute_ms},
              {"GBps", bytes / (ms * 1e-3) / 1e9},
              {"of_copy_bound", bytes / (ms * 1e-3) / bandwidth}};
}

// GELU forward and the AdamW update over `count` floats: memory-bound, so GB/s against the copy
// bound (GELU reads x and writes y: 8 bytes per element; AdamW reads w, g, m, v and writes w, m, v:
// 28 bytes).
inline Json bench_elementwise(std::size_t count, int repeats, double bandwidth) {
  namespace km = kernels::moe;
  using kernels::cuda::median_ms;
  const DeviceOperand<float> x(random_floats(count, 20)), y(count), g(random_floats(count, 21)), m(count), v(count);
  SKEW_CUDA_CHECK(cudaMemset(m, 0, count * sizeof(float)));
  SKEW_CUDA_CHECK(cudaMemset(v, 0, count * sizeof(float)));
  const double gelu_ms = median_ms(repeats, [&] { km::gelu_forward(Device::Cuda, count, x, y); });
  const km::AdamWStep k{1.f, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10.f, 4.5f};
  const double adamw_ms = median_ms(repeats, [&] { km::adamw_update(Device::Cuda, x, g, m, v, 0, count, true, k); });
  const double gelu_bytes = 8.0 * double(count), adamw_bytes = 28.0 * double(count);
  return Json{{"count", count},
              {"gelu_ms", gelu_ms},
              {"gelu_of_copy_bound", gelu_bytes / (gelu_ms * 1e-3) / bandwidth},
              {"adamw_ms", adamw_ms},
              {"adamw_of_copy_bound", adamw_bytes / (adamw_ms * 1e-3) / bandwidth}};
}

}  // namespace skew::bench
#endif
