#include "lib/preduce/hetero.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/number_text.hpp"
#include "core/rng.hpp"

namespace skew::preduce {
namespace {

// Rng streams, one per use, so that no two draws of different purposes coincide.
constexpr std::uint64_t kJitterStream = 0x4e7e000000ull;  // + worker
constexpr std::uint64_t kMovingStream = 0x3a0e000000ull;  // shared by all workers: one slow set
constexpr std::uint64_t kBurstStream = 0xb0257000000ull;  // + worker
constexpr std::uint64_t kParetoStream = 0x9a2e700000ull;  // + worker
constexpr std::uint64_t kPlacementStream = 0x91ace000000ull;

// Whether `worker` is in the set of k distinct workers of [0, n) drawn for `block` (Floyd's
// sampling: k draws, every k-subset equally likely; the same set on every worker).
bool in_moving_set(std::uint64_t seed, std::int64_t block, int k, int n, int worker) {
  Rng rng(seed, kMovingStream, static_cast<std::uint64_t>(block) << 24);
  std::vector<int> chosen;
  for (int j = n - k; j < n; ++j) {
    const int t = static_cast<int>(rng.below(static_cast<std::uint64_t>(j) + 1));
    chosen.push_back(std::find(chosen.begin(), chosen.end(), t) == chosen.end() ? t : j);
  }
  return std::find(chosen.begin(), chosen.end(), worker) != chosen.end();
}

}  // namespace

int placement_slot(const HeteroOptions& options, int worker, int num_workers) {
  if (!options.placement_shuffled) return worker;
  std::vector<int> slot(static_cast<std::size_t>(num_workers));
  std::iota(slot.begin(), slot.end(), 0);
  Rng rng(options.seed, kPlacementStream);
  for (std::size_t i = slot.size(); i > 1; --i)  // Fisher-Yates: every permutation equally likely
    std::swap(slot[i - 1], slot[static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(i)))]);
  return slot[static_cast<std::size_t>(worker)];
}

Hetero::Hetero(const HeteroOptions& options, int worker, int num_workers)
    : opt_(options), worker_(worker), num_workers_(num_workers) {
  const auto slot = static_cast<std::size_t>(placement_slot(opt_, worker, num_workers));
  if (!opt_.slowdown.empty()) slowdown_ = opt_.slowdown[slot % opt_.slowdown.size()];
  SKEW_CHECK(slowdown_ >= 1.0, "hetero.slowdown: factor " << slowdown_ << " for worker " << worker << " is below 1");
  if (!opt_.link_ms.empty()) link_s_ = opt_.link_ms[slot % opt_.link_ms.size()] * 1e-3;
  SKEW_CHECK(link_s_ >= 0.0, "hetero.link_ms: delay " << link_s_ * 1e3 << " for worker " << worker << " is negative");
  SKEW_CHECK(opt_.jitter == "none" || opt_.jitter == "exp" || opt_.jitter == "uniform" || opt_.jitter == "spike",
             "hetero.jitter: unknown distribution '" << opt_.jitter << "' (none, exp, uniform, spike)");
  SKEW_CHECK(opt_.model == "fixed" || opt_.model == "moving" || opt_.model == "bursty" || opt_.model == "pareto",
             "hetero.model: unknown model '" << opt_.model << "' (fixed, moving, bursty, pareto)");
  SKEW_CHECK(opt_.jitter_ms >= 0.0 && opt_.base_ms >= 0.0, "hetero.jitter_ms and hetero.base_ms must be >= 0");
  SKEW_CHECK(opt_.factor >= 1.0, "hetero.factor must be >= 1, got " << opt_.factor);
  SKEW_CHECK(opt_.period >= 1, "hetero.period must be >= 1, got " << opt_.period);
  SKEW_CHECK(opt_.burst_prob >= 0.0 && opt_.burst_prob <= 1.0, "hetero.burst_prob must be in [0, 1]");
  SKEW_CHECK(opt_.tail_index > 1.0, "hetero.tail_index must be > 1 (a finite mean), got " << opt_.tail_index);
  SKEW_CHECK(opt_.max_factor >= 1.0, "hetero.max_factor must be >= 1, got " << opt_.max_factor);
  SKEW_CHECK(
      opt_.model != "moving" || (opt_.stragglers >= 1 && opt_.stragglers <= num_workers_),
      "hetero.stragglers = " << opt_.stragglers << " is not in [1, " << num_workers_ << "] (the workers of this run)");
  if (opt_.trace.empty()) return;
  std::ifstream in(opt_.trace);
  SKEW_CHECK(in, "hetero.trace: cannot open " << opt_.trace);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<double> row;
    std::stringstream cells(line + ",");  // "0," holds an empty last value, which getline would drop
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      const std::optional<double> delay = finite_number(cell);
      SKEW_CHECK(delay && *delay >= 0 && *delay <= kMaxDelayMs,
                 "hetero.trace: " << opt_.trace << ":" << line_no << ": value " << row.size() + 1 << " '" << cell
                                  << "' is not a delay in ms: expected a finite number in [0, " << kMaxDelayMs << "]");
      row.push_back(*delay);
    }
    // A short row is a trace recorded for fewer workers: repeating its values would invent delays.
    SKEW_CHECK(row.size() > static_cast<std::size_t>(worker),
               "hetero.trace: " << opt_.trace << ":" << line_no << ": " << row.size() << " delays, none for worker "
                                << worker << " (one value per worker)");
    trace_ms_.push_back(std::move(row));
  }
  SKEW_CHECK(!trace_ms_.empty(), "hetero.trace: " << opt_.trace << " has no delays");
}

double Hetero::model_factor(std::int64_t step) const {
  const std::int64_t block = step / opt_.period;
  const auto w = static_cast<std::uint64_t>(worker_);
  if (opt_.model == "moving")
    return in_moving_set(opt_.seed, block, opt_.stragglers, num_workers_, worker_) ? opt_.factor : 1.0;
  if (opt_.model == "bursty")
    return Rng(opt_.seed, kBurstStream + w, static_cast<std::uint64_t>(block)).uniform() < opt_.burst_prob ? opt_.factor
                                                                                                           : 1.0;
  if (opt_.model == "pareto") {
    // Inverse CDF: X = (1 - u)^(-1 / tail_index) for u uniform in [0, 1).
    const double u = Rng(opt_.seed, kParetoStream + w, static_cast<std::uint64_t>(step)).uniform();
    return std::min(opt_.max_factor, std::pow(1.0 - u, -1.0 / opt_.tail_index));
  }
  return 1.0;
}

double Hetero::injected_s(std::int64_t step, double compute_s) const {
  const double factor = slowdown_ * model_factor(step);
  double ms = opt_.base_ms * factor + compute_s * 1e3 * (factor - 1.0);
  Rng rng(opt_.seed, kJitterStream + static_cast<std::uint64_t>(worker_), static_cast<std::uint64_t>(step) * 2);
  if (opt_.jitter == "exp")
    ms += -opt_.jitter_ms * std::log(1.0 - static_cast<double>(rng.uniform()));
  else if (opt_.jitter == "uniform")
    ms += 2.0 * opt_.jitter_ms * rng.uniform();
  else if (opt_.jitter == "spike" && rng.uniform() < opt_.jitter_prob)
    ms += opt_.jitter_ms;
  if (!trace_ms_.empty()) {
    const auto& row = trace_ms_[static_cast<std::size_t>(step) % trace_ms_.size()];
    ms += row[static_cast<std::size_t>(worker_)];
  }
  return ms * 1e-3;
}

void sleep_seconds(double s) {
  if (s > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

}  // namespace skew::preduce
