#include "lib/wide/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace skew::wide {

OptimizerKind optimizer_from_name(const std::string& name) {
  if (name == "sgd") return OptimizerKind::Sgd;
  if (name == "adagrad") return OptimizerKind::AdaGrad;
  if (name == "ftrl") return OptimizerKind::Ftrl;
  SKEW_THROW("unknown optimizer '" << name << "' (expected sgd, adagrad or ftrl)");
}

const char* optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::Sgd ? "sgd" : kind == OptimizerKind::AdaGrad ? "adagrad" : "ftrl";
}

float adagrad_eps(double init, std::int64_t samples_per_step) {
  SKEW_CHECK(init > 0 && samples_per_step > 0,
             "AdaGrad's start " << init << " for steps of " << samples_per_step << " samples: both must be positive");
  const double samples = double(samples_per_step);
  const float eps = float(init / (samples * samples));
  SKEW_CHECK(eps > 0, "train.adagrad_init = " << init << " over a batch of " << samples_per_step
                                              << " samples squared leaves no positive float for AdaGrad's start");
  return eps;
}

Optimizer::Optimizer(const OptimizerOptions& options, const kernels::WideShape& shape, std::span<const float> params)
    : options_(options), shape_(shape) {
  SKEW_CHECK(options.lr > 0, "train.lr must be positive, got " << options.lr);
  if (options.kind == OptimizerKind::AdaGrad) {
    n_.resize(params.size());  // zero pages: not written here
    n_[0] = options.eps;
  }
  if (options.kind == OptimizerKind::Ftrl) {
    n_.resize(params.size());  // zero pages: not written here
    z_.resize(params.size());
    // With n = 0 FTRL's weight is -z * alpha / beta: start from the given parameters. A zero
    // parameter leaves its z at +0 (the formula gives -0): the update reads z's sign only through
    // copysignf(l1, z) where |z| > l1, so the weights are the same bit for bit, and LR's model,
    // all zeros, writes no page of z at all.
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i] != 0.0f) z_[i] = -params[i] * options.beta / options.lr;
  }
}

std::vector<float> Optimizer::saved_n_state() const {
  std::vector<float> n(n_.begin(), n_.end());
  if (options_.kind == OptimizerKind::AdaGrad) std::replace(n.begin(), n.end(), 0.0f, options_.eps);
  return n;
}

void Optimizer::set_state(std::vector<float> n, std::vector<float> z) {
  SKEW_CHECK(n.size() == n_.size() && z.size() == z_.size(),
             "optimizer state of " << n.size() << " + " << z.size() << " values given, this optimizer holds "
                                   << n_.size() << " + " << z_.size());
  n_.assign(n.begin(), n.end());
  z_.assign(z.begin(), z.end());
}

// Called once per touched row (a single float for LR): inlined into the loops over rows. The
// rule comes as the step's local copy: stores to params could alias the member's floats and
// force them to be reloaded for every coordinate.
[[gnu::always_inline]] inline void Optimizer::update(const kernels::WideUpdateRule& r, float* params, float* g,
                                                     std::size_t offset, std::size_t count, float scale) {
  kernels::wide_update_row(r, params, g, offset, count, scale, state());
}

void Optimizer::step(float* params, float* grad, const std::vector<std::uint32_t>& features, float scale,
                     kernels::WidePool& pool) {
  const kernels::WideUpdateRule r = rule();
  update(r, params, grad, 0, 1, scale);
  const std::size_t row_len = std::size_t(shape_.row_len());
  constexpr std::int64_t kRowsPerTask = 2048;
  const std::int64_t n = std::int64_t(features.size());
  // The touched rows come in batch order, scattered over arrays that need not fit any cache:
  // the rows (and optimizer state) kRowsAhead positions on are fetched while these update.
  constexpr std::int64_t kRowsAhead = 8;
  const int len = int(row_len);
  pool.run((n + kRowsPerTask - 1) / kRowsPerTask, [&](std::int64_t task, int) {
    const std::int64_t end = std::min(n, (task + 1) * kRowsPerTask);
    for (std::int64_t i = task * kRowsPerTask; i < end; ++i) {
      if (i + kRowsAhead < end) {
        const std::size_t ahead = 1 + features[std::size_t(i + kRowsAhead)] * row_len;
        kernels::wide_prefetch_row(params + ahead, len);
        kernels::wide_prefetch_row(grad + ahead, len);
        if (!n_.empty()) kernels::wide_prefetch_row(n_.data() + ahead, len);
        if (!z_.empty()) kernels::wide_prefetch_row(z_.data() + ahead, len);
      }
      const std::size_t offset = 1 + features[std::size_t(i)] * row_len;
      update(r, params, grad + offset, offset, row_len, scale);
    }
  });
}

namespace {

// The sparse step's rows [first, end) of `part`, built for AVX-512, AVX2 and the x86-64 baseline
// (target_clones) and the CPU's best picked at load time: FFM's AdaGrad rows are ~150 floats, and
// their square roots and divisions go 16 or 8 at a time instead of 4. optimizer.cpp compiles with
// -ffp-contract=off (lib/wide/CMakeLists.txt), so no version fuses a multiply into an add, and
// square root and division are correctly rounded at any width: every version computes the
// baseline's floats, and a model does not depend on the instruction set it trained on.
__attribute__((target_clones("avx512f", "avx2", "default"))) void update_part_rows(
    const kernels::WideUpdateRule& r, float* params, kernels::WideOptimizerState state, float scale,
    kernels::WideSparseGradient::Part& part, std::size_t first, std::size_t end, std::size_t row_len) {
  // wide_update_rows fetches the rows some way ahead of the one it updates, from its second few
  // on: the first few are fetched here all at once, so that their misses overlap. FFM's batch of
  // 32 has ~10 tasks of ~100 rows a step, so these are ~8% of its rows.
  constexpr std::size_t kFirstRows = 8;
  const int len = int(row_len);
  for (std::size_t i = first; i < std::min(end, first + kFirstRows); ++i) {
    const std::size_t offset = 1 + part.features[i] * row_len;
    kernels::wide_prefetch_row_for_write(params + offset, len);
    if (state.n) kernels::wide_prefetch_row_for_write(state.n + offset, len);
    if (state.z) kernels::wide_prefetch_row_for_write(state.z + offset, len);
  }
  kernels::wide_update_rows(r, params, state, scale, part.features.data(), first, end, row_len,
                            [&](std::size_t row) { return part.folded_row(row, row_len); });
}

}  // namespace

void Optimizer::step(float* params, kernels::WideSparseGradient& grad, float scale, kernels::WidePool& pool) {
  const kernels::WideUpdateRule r = rule();
  update(r, params, &grad.bias, 0, 1, scale);
  const std::size_t row_len = std::size_t(shape_.row_len());
  // About 64 KB of gradient a task (4096 LR rows, ~100 FFM rows): enough tasks to balance the
  // threads when one part holds all of FM's or FFM's rows. One thread takes a part whole: each
  // task starts its look-ahead fetches afresh (rows are 32-bit ids: fewer than 2^32 a part).
  const std::size_t rows_per_task =
      pool.threads() == 1 ? std::size_t(1) << 32 : std::clamp<std::size_t>(16384 / row_len, 64, 4096);
  std::vector<std::pair<std::size_t, std::size_t>> tasks;  // (part, first row)
  for (std::size_t p = 0; p < grad.parts.size(); ++p)
    for (std::size_t r = 0; r < grad.parts[p].features.size(); r += rows_per_task) tasks.emplace_back(p, r);
  pool.run(std::int64_t(tasks.size()), [&](std::int64_t task, int) {
    const auto [p, first] = tasks[std::size_t(task)];
    kernels::WideSparseGradient::Part& part = grad.parts[p];
    update_part_rows(r, params, state(), scale, part, first, std::min(part.features.size(), first + rows_per_task),
                     row_len);
  });
}

kernels::WideFusedUpdate Optimizer::fused_update(float* params, float scale) {
  return kernels::WideFusedUpdate{rule(), state(), params, scale};
}

void Optimizer::step_bias(float* params, float& bias_grad, float scale) {
  update(rule(), params, &bias_grad, 0, 1, scale);
}

}  // namespace skew::wide
