#include "lib/placement/shadowing.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace skew::placement {

double ShadowRouting::local_tokens(int rank, int expert) const {
  return local.empty() ? global[static_cast<std::size_t>(expert)] / ranks
                       : local[static_cast<std::size_t>(rank) * owner.size() + static_cast<std::size_t>(expert)];
}

ShadowRouting uniform_routing(const std::vector<std::int64_t>& counts, int gpus) {
  SKEW_CHECK(gpus >= 1 && !counts.empty() && counts.size() % static_cast<std::size_t>(gpus) == 0,
             counts.size() << " experts cannot be spread over " << gpus << " GPUs in equal blocks");
  ShadowRouting r;
  r.ranks = gpus;
  const std::size_t per_rank = counts.size() / static_cast<std::size_t>(gpus);
  for (std::size_t e = 0; e < counts.size(); ++e) {
    r.owner.push_back(static_cast<int>(e / per_rank));
    r.global.push_back(static_cast<double>(counts[e]));
  }
  return r;
}

ShadowRouting measured_routing(const std::vector<std::int64_t>& local, const std::vector<int>& owner, int ranks) {
  const std::size_t E = owner.size();
  SKEW_CHECK(ranks >= 1 && local.size() == E * static_cast<std::size_t>(ranks),
             "shadowing: " << local.size() << " local counts for " << E << " experts on " << ranks << " ranks");
  ShadowRouting r;
  r.ranks = ranks;
  r.owner = owner;
  r.global.assign(E, 0.0);
  for (std::size_t i = 0; i < local.size(); ++i) {
    r.local.push_back(static_cast<double>(local[i]));
    r.global[i % E] += static_cast<double>(local[i]);
  }
  for (int o : owner) SKEW_CHECK(o >= 0 && o < ranks, "shadowing: owner rank " << o << " not in [0, " << ranks << ")");
  return r;
}

double shadowed_seconds(const CostModel& model, const ShadowRouting& routing, const std::vector<char>& shadowed,
                        const ExchangeSchedule& schedule, double* balance) {
  SKEW_CHECK(schedule.stages >= 1, "fastermoe pipeline stages must be >= 1, got " << schedule.stages);
  const int N = routing.ranks, E = routing.num_experts();
  std::vector<double> owned(static_cast<std::size_t>(N), 0.0), loads(owned.size(), 0.0);
  int num_shadowed = 0;
  for (int e = 0; e < E; ++e) {
    if (shadowed[static_cast<std::size_t>(e)]) {
      ++num_shadowed;
      for (int r = 0; r < N; ++r) loads[static_cast<std::size_t>(r)] += routing.local_tokens(r, e);
    } else {
      owned[static_cast<std::size_t>(routing.owner[static_cast<std::size_t>(e)])] +=
          routing.global[static_cast<std::size_t>(e)];
    }
  }
  for (int r = 0; r < N; ++r) loads[static_cast<std::size_t>(r)] += owned[static_cast<std::size_t>(r)];
  if (balance) *balance = balance_ratio(loads);
  double alltoall = 0;
  if (routing.local.empty()) {
    alltoall = model.alltoall_seconds(owned);  // equal parts from every source: the O(N) form
  } else {
    std::vector<RankTraffic> traffic(static_cast<std::size_t>(N));
    const int G = model.constants().gpus_per_node;
    for (int e = 0; e < E; ++e) {
      const int dst = routing.owner[static_cast<std::size_t>(e)];
      if (shadowed[static_cast<std::size_t>(e)]) continue;
      for (int src = 0; src < N; ++src) {
        const double tokens = routing.local_tokens(src, e);
        if (src == dst || tokens <= 0) continue;
        auto& s = traffic[static_cast<std::size_t>(src)];
        auto& d = traffic[static_cast<std::size_t>(dst)];
        (src / G == dst / G ? s.send_intra : s.send_inter) += tokens;
        (src / G == dst / G ? d.recv_intra : d.recv_inter) += tokens;
      }
    }
    alltoall = model.alltoall_traffic_seconds(traffic);
  }
  std::vector<int> all(static_cast<std::size_t>(N));
  std::iota(all.begin(), all.end(), 0);
  const double shadow_sync = num_shadowed * model.allreduce_seconds(model.expert_grad_bytes(), all);
  const double compute = model.compute_seconds(*std::max_element(loads.begin(), loads.end()));
  return model.scheduled_seconds(compute, alltoall, N, schedule) + shadow_sync;
}

ShadowDecision choose_shadows(const CostModel& model, const ShadowRouting& routing, const ExchangeSchedule& schedule) {
  const auto E = static_cast<std::size_t>(routing.num_experts());
  SKEW_CHECK(routing.global.size() == E, "shadowing: " << routing.global.size() << " loads for " << E << " experts");
  std::vector<int> hottest(E);
  std::iota(hottest.begin(), hottest.end(), 0);
  std::stable_sort(hottest.begin(), hottest.end(), [&](int a, int b) {
    return routing.global[static_cast<std::size_t>(a)] > routing.global[static_cast<std::size_t>(b)];
  });
  std::vector<char> shadowed(E, 0);
  ShadowDecision out;
  out.seconds = shadowed_seconds(model, routing, shadowed, schedule, &out.balance);
  for (int e : hottest) {
    if (routing.ranks == 1) break;
    shadowed[static_cast<std::size_t>(e)] = 1;
    double balance = 1;
    const double t = shadowed_seconds(model, routing, shadowed, schedule, &balance);
    if (t >= out.seconds) break;
    out.seconds = t, out.balance = balance;
    out.shadowed.push_back(e);
  }
  std::sort(out.shadowed.begin(), out.shadowed.end());
  return out;
}

}  // namespace skew::placement
