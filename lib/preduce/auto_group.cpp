#include "lib/preduce/auto_group.hpp"

#include <algorithm>
#include <cmath>

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

int fast_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group) {
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

double GroupCost::of(int members) const {
  if (members <= 1) return 0.0;
  const double k = members;
  const double hops = linear_hops ? k - 1.0 : std::ceil(std::log2(k));
  return controller_s + hops * latency_s + 2.0 * (k - 1.0) / k * transfer_s;
}

int auto_group_size(const std::vector<std::vector<double>>& step_times, double slow_ratio, int max_group,
                    const GroupCost& cost) {
  const int most = fast_group_size(step_times, slow_ratio, max_group);
  std::vector<double> medians;
  double arrivals = 0.0;  // ready workers per second, all of them
  for (const auto& t : step_times) {
    medians.push_back(median(t));
    arrivals += 1.0 / std::max(medians.back(), 1e-12);
  }
  const double typical = median(medians);
  int best = 2;
  double best_rate = -1.0;
  for (int p = 2; p <= most; ++p) {
    const double round_trip = (p - 1) / (2.0 * arrivals) + cost.of(p);
    const double rate = (1.0 - 1.0 / p) / (typical + round_trip);
    if (rate > best_rate) {
      best = p;
      best_rate = rate;
    }
  }
  return best;
}

double simulated_step_s(const TrainOptions& opt, const Hetero& hetero, std::int64_t step) {
  const double compute = opt.sim_compute_ms * 1e-3;
  return compute + hetero.injected_s(step, compute) + opt.sim_overhead_ms * 1e-3;
}

TrainOptions resolve_simulated_group_size(const TrainOptions& opt, std::size_t model_floats, double& warmup_s) {
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
  const GroupCost cost{opt.sim_controller_ms * 1e-3, opt.sim_latency_ms * 1e-3,
                       static_cast<double>(model_floats) * sizeof(float) / (opt.sim_bandwidth_gbs * 1e9),
                       opt.sim_latency_linear};
  resolved.group_size = opt.sim_workers < 2 ? 2 : auto_group_size(times, opt.auto_slow_ratio, opt.auto_max_group, cost);
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
  double floats = me ? static_cast<double>(me->params().size()) : 0.0;
  world.allreduce(comm::view(&floats, 1), comm::ReduceOp::Max);
  std::vector<float> model(static_cast<std::size_t>(floats), 0.0f);
  world.barrier();
  const Timer reduce;
  world.allreduce(comm::view(model), comm::ReduceOp::Sum);
  double reduce_s = reduce.seconds();
  world.allreduce(comm::view(&reduce_s, 1), comm::ReduceOp::Max);
  std::vector<double> all(window * static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(mine), comm::view(all));
  std::vector<std::vector<double>> times;
  for (int r = 0; r < world.size(); ++r)
    if (all[static_cast<std::size_t>(r) * window] >= 0.0)
      times.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * window),
                         all.begin() + static_cast<std::ptrdiff_t>((r + 1) * window));
  const double n = world.size();
  GroupCost cost;
  cost.transfer_s = n > 1 ? reduce_s * n / (2.0 * (n - 1.0)) : 0.0;
  return times.size() < 2 ? 2 : auto_group_size(times, opt.auto_slow_ratio, opt.auto_max_group, cost);
}

}  // namespace skew::preduce
