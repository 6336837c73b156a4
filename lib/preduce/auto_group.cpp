#include "lib/preduce/auto_group.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace skew::preduce {
namespace {

double median(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)));
}

}  // namespace

int auto_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group) {
  SKEW_CHECK(!step_times.empty(), "preduce.group_size = 0 (auto): no workers measured");
  std::vector<double> medians;
  for (std::size_t w = 0; w < step_times.size(); ++w) {
    SKEW_CHECK(!step_times[w].empty(), "preduce.group_size = 0 (auto): worker " << w << " measured no steps");
    medians.push_back(median(step_times[w]));
  }
  const double typical = median(medians);
  const auto fast = std::count_if(medians.begin(), medians.end(), [&](double m) { return m <= slow_ratio * typical; });
  const int workers = static_cast<int>(step_times.size());
  return std::min(workers, std::clamp(static_cast<int>(fast), 2, std::max(2, max_group)));
}

double simulated_step_s(const TrainOptions& opt, const Hetero& hetero, std::int64_t step) {
  const double compute = opt.sim_compute_ms * 1e-3;
  return compute + hetero.injected_s(step, compute) + opt.sim_overhead_ms * 1e-3;
}

TrainOptions resolve_simulated_group_size(const TrainOptions& opt, double& warmup_s) {
  warmup_s = 0.0;
  TrainOptions resolved = opt;
  std::vector<std::vector<double>> times(static_cast<std::size_t>(opt.sim_workers));
  for (int w = 0; w < opt.sim_workers; ++w) {
    const Hetero hetero(opt.hetero, w, opt.sim_workers);
    double total = 0.0;
    for (std::int64_t s = 0; s < opt.auto_warmup_steps; ++s) {
      times[static_cast<std::size_t>(w)].push_back(simulated_step_s(opt, hetero, s));
      total += times[static_cast<std::size_t>(w)].back();
    }
    warmup_s = std::max(warmup_s, total);
  }
  resolved.group_size = opt.sim_workers < 2 ? 2 : auto_group_size(times, opt.auto_slow_ratio, opt.auto_max_group);
  return resolved;
}

// A rank without a worker (the dedicated controller) sends -1s, which are left out.
int measured_group_size(comm::ProcessGroup& world, Worker* me, const TrainOptions& opt, double& warmup_s) {
  const auto window = static_cast<std::size_t>(opt.auto_warmup_steps);
  std::vector<double> mine(window, -1.0);  // -1: no worker on this rank
  const Timer total;
  if (me)
    for (std::size_t s = 0; s < window; ++s) {
      const Timer t;
      me->gradient_at(me->params());
      sleep_seconds(me->hetero().injected_s(static_cast<std::int64_t>(s), t.seconds()));
      mine[s] = t.seconds();
    }
  warmup_s = total.seconds();
  world.allreduce(comm::view(&warmup_s, 1), comm::ReduceOp::Max);
  std::vector<double> all(window * static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(mine), comm::view(all));
  std::vector<std::vector<double>> times;
  for (int r = 0; r < world.size(); ++r)
    if (all[static_cast<std::size_t>(r) * window] >= 0.0)
      times.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * window),
                         all.begin() + static_cast<std::ptrdiff_t>((r + 1) * window));
  return times.size() < 2 ? 2 : auto_group_size(times, opt.auto_slow_ratio, opt.auto_max_group);
}

}  // namespace skew::preduce
