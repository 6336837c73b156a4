#include "lib/preduce/eval_sample.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.hpp"
#include "lib/preduce/hetero.hpp"

namespace skew::preduce {
namespace {

constexpr std::uint64_t kEvalStream = 0xe7a15000000ull;

// `k` of `pool`, uniformly at random (a partial Fisher-Yates shuffle).
std::vector<int> draw(std::vector<int> pool, std::size_t k, Rng& rng) {
  for (std::size_t i = 0; i < k; ++i) {
    const auto j = i + static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(pool.size() - i)));
    std::swap(pool[i], pool[j]);
  }
  pool.resize(k);
  return pool;
}

}  // namespace

EvalSample eval_sample(const TrainOptions& opt, int num_workers) {
  EvalSample s;
  const auto n = static_cast<std::size_t>(num_workers);
  if (opt.sim_eval_workers >= num_workers) {
    s.workers.resize(n);
    std::iota(s.workers.begin(), s.workers.end(), 0);
    return s;
  }
  std::vector<double> slowdown, link;
  for (int w = 0; w < num_workers; ++w) {
    const Hetero h(opt.hetero, w, num_workers);
    slowdown.push_back(h.slowdown());
    link.push_back(h.link_s());
  }
  const double fastest = *std::min_element(slowdown.begin(), slowdown.end());
  const double quickest_link = *std::min_element(link.begin(), link.end());
  std::vector<int> stragglers, others;
  for (int w = 0; w < num_workers; ++w) {
    const auto i = static_cast<std::size_t>(w);
    (slowdown[i] > fastest || link[i] > quickest_link ? stragglers : others).push_back(w);
  }
  const auto e = static_cast<std::size_t>(opt.sim_eval_workers);
  std::size_t k_slow = static_cast<std::size_t>(std::lround(static_cast<double>(e * stragglers.size()) / n));
  if (!stragglers.empty()) k_slow = std::clamp<std::size_t>(k_slow, 1, others.empty() ? e : e - 1);
  Rng rng(opt.seed, kEvalStream);
  const auto add = [&](const std::vector<int>& pool, std::size_t k) {
    for (int w : draw(pool, k, rng)) {
      s.workers.push_back(w);
      s.weights.push_back(static_cast<double>(pool.size()) / static_cast<double>(n) / static_cast<double>(k));
    }
  };
  if (k_slow > 0) add(stragglers, k_slow);
  if (e > k_slow) add(others, e - k_slow);
  std::vector<std::size_t> order(s.workers.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.workers[a] < s.workers[b]; });
  EvalSample sorted;
  for (std::size_t i : order) {
    sorted.workers.push_back(s.workers[i]);
    sorted.weights.push_back(s.weights[i]);
  }
  return sorted;
}

}  // namespace skew::preduce
