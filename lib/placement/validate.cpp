#include "lib/placement/validate.hpp"

#include "lib/core/error.hpp"
#include "lib/core/metrics.hpp"

namespace skew::placement {

MeasuredRun read_measured_jsonl(const std::string& path) {
  MeasuredRun run;
  read_jsonl(path, "measured metrics", [&](const Json& j, const std::string& where) {
    if (!j.contains("tokens_per_expert") || !j.contains("time")) return;
    try {
      run.trace.push_back(j.at("tokens_per_expert").get<RoutingCounts>());
      run.expert_seconds.push_back(j.at("time").at("expert").get<double>());
      run.alltoall_seconds.push_back(j.at("time").at("alltoall").get<double>());
    } catch (const std::exception& e) {
      SKEW_THROW(where << ": expected tokens_per_expert [layer][expert] and time.expert/time.alltoall: " << e.what());
    }
  });
  SKEW_CHECK(run.trace.size() >= 2,
             path << " has " << run.trace.size() << " iterations with tokens_per_expert and time; need 2 or more");
  return run;
}

Validation validate_cost_model(const CostModel& model, const MeasuredRun& run, int ranks) {
  Validation v;
  for (std::size_t it = 1; it < run.trace.size(); ++it) {
    for (const auto& counts : run.trace[it]) {
      const int experts = static_cast<int>(counts.size());
      SKEW_CHECK(experts % ranks == 0, experts << " experts do not split over " << ranks << " ranks");
      const auto p = LayerPlacement::block(experts, ranks, experts / ranks);
      const auto loads = model.rank_loads(p, std::vector<double>(counts.begin(), counts.end()));
      v.predicted_expert += model.compute_seconds(loads[0]);
      v.predicted_alltoall += model.alltoall_traffic_seconds(model.dispatch_traffic(p, std::vector<double>(counts.begin(), counts.end())));
    }
    v.measured_expert += run.expert_seconds[it];
    v.measured_alltoall += run.alltoall_seconds[it];
    ++v.iterations;
  }
  for (double* x : {&v.predicted_expert, &v.measured_expert, &v.predicted_alltoall, &v.measured_alltoall})
    *x /= v.iterations;
  return v;
}

}  // namespace skew::placement
