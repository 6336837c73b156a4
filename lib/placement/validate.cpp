#include "lib/placement/validate.hpp"

#include <algorithm>
#include <sstream>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "lib/placement/planner.hpp"

namespace skew::placement {

MeasuredRun read_measured_jsonl(const std::string& path) {
  MeasuredRun run;
  std::vector<std::string> current;
  read_jsonl(path, "measured metrics", [&](const Json& j, const std::string& where) {
    if (!j.contains("tokens_per_expert") || !j.contains("time")) return;
    try {
      run.trace.push_back(j.at("tokens_per_expert").get<RoutingCounts>());
      run.alltoall_seconds.push_back(j.at("time").at("alltoall").get<double>());
      const Json& pr = j.at("per_rank");
      run.rows.push_back(pr.at("rows").get<RankLayerValues>());
      run.expert_cpu.push_back(pr.at("expert_cpu_s").get<RankLayerValues>());
      run.alltoall_bytes.push_back(pr.at("alltoall_bytes").get<RankLayerValues>());
      run.sync_bytes.push_back(pr.at("sync_bytes").get<RankLayerValues>());
      if (current.empty()) current.assign(run.trace.back().size(), "");
      if (j.contains("placement_change"))
        current = j.at("placement_change").at("placement").get<std::vector<std::string>>();
      run.placements.push_back(current);
    } catch (const std::exception& e) {
      SKEW_THROW(where << ": expected tokens_per_expert [layer][expert], time.alltoall and per_rank "
                       << "{rows, expert_cpu_s, alltoall_bytes, sync_bytes} [rank][layer]: " << e.what());
    }
  });
  SKEW_CHECK(run.trace.size() >= 2,
             path << " has " << run.trace.size() << " iterations with tokens_per_expert and per_rank; need 2 or more");
  return run;
}

LayerPlacement parse_placement(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  LayerPlacement p;
  SKEW_CHECK(in >> word && word.rfind("N=", 0) == 0, "placement '" << text << "' does not start with N=");
  p.world_size = std::stoi(word.substr(2));
  SKEW_CHECK(in >> word && word.rfind("S=", 0) == 0, "placement '" << text << "' has no S= after N=");
  p.slots_per_rank = std::stoi(word.substr(2));
  while (in >> word) {
    const auto colon = word.find(':');
    SKEW_CHECK(word[0] == 'e' && colon != std::string::npos, "placement '" << text << "': bad expert entry " << word);
    SKEW_CHECK(std::stoi(word.substr(1, colon - 1)) == p.num_experts(),
               "placement '" << text << "': experts out of order at " << word);
    std::vector<Replica> reps;
    std::istringstream list(word.substr(colon + 1));
    std::string rep;
    while (std::getline(list, rep, ',')) {
      const auto at = rep.find('@');
      SKEW_CHECK(at != std::string::npos, "placement '" << text << "': replica " << rep << " lacks @share");
      reps.push_back({std::stoi(rep.substr(0, at)), std::stod(rep.substr(at + 1))});
    }
    p.experts.push_back(std::move(reps));
  }
  p.validate();
  return p;
}

Validation validate_cost_model(const CostModel& model, const MeasuredRun& run, int ranks, bool live_shares) {
  Validation v;
  const double token_bytes = static_cast<double>(model.shape().hidden_dim) * model.shape().activation_bytes;
  const double bandwidth = model.constants().alltoall_bandwidth;
  for (std::size_t it = 1; it < run.trace.size(); ++it) {
    const auto& measured_rows = run.rows[it];
    SKEW_CHECK(static_cast<int>(measured_rows.size()) == ranks,
               "iteration " << it << " has per-rank values for " << measured_rows.size() << " ranks, not " << ranks);
    for (std::size_t l = 0; l < run.trace[it].size(); ++l) {
      const auto& counts = run.trace[it][l];
      const std::vector<double> load(counts.begin(), counts.end());
      const int experts = static_cast<int>(counts.size());
      SKEW_CHECK(experts % ranks == 0, experts << " experts do not split over " << ranks << " ranks");
      const std::string& text = run.placements[it][l];
      LayerPlacement p = text.empty() ? LayerPlacement::block(experts, ranks, experts / ranks) : parse_placement(text);
      if (live_shares) assign_shares(p, load, true);
      const auto loads = model.rank_loads(p, load);
      const auto traffic = model.dispatch_traffic(p, load);
      std::vector<double> sync(static_cast<std::size_t>(ranks), 0.0);
      for (const auto& reps : p.experts)
        if (reps.size() >= 2)
          for (const auto& r : reps)
            sync[static_cast<std::size_t>(r.rank)] += 2.0 * static_cast<double>(reps.size() - 1) /
                                                      static_cast<double>(reps.size()) * model.expert_grad_bytes();
      double rows_p = 0, rows_m = 0, comp_p = 0, comp_m = 0, step_p = 0, step_m = 0;
      for (int r = 0; r < ranks; ++r) {
        const auto q = static_cast<std::size_t>(r);
        const auto& t = traffic[q];
        const double a2a_p = 2.0 * (t.send_intra + t.send_inter + t.recv_intra + t.recv_inter) * token_bytes;
        const double a2a_m = run.alltoall_bytes[it][q][l], sync_m = run.sync_bytes[it][q][l];
        rows_p = std::max(rows_p, loads[q]);
        rows_m = std::max(rows_m, measured_rows[q][l]);
        comp_p = std::max(comp_p, model.compute_seconds(loads[q]));
        comp_m = std::max(comp_m, run.expert_cpu[it][q][l]);
        step_p = std::max(step_p, model.compute_seconds(loads[q]) + (a2a_p + sync[q]) / bandwidth);
        step_m = std::max(step_m, run.expert_cpu[it][q][l] + (a2a_m + sync_m) / bandwidth);
        v.alltoall_bytes.predicted += a2a_p, v.alltoall_bytes.measured += a2a_m;
        v.sync_bytes.predicted += sync[q], v.sync_bytes.measured += sync_m;
      }
      v.rows.predicted += rows_p, v.rows.measured += rows_m;
      v.compute.predicted += comp_p, v.compute.measured += comp_m;
      v.step.predicted += step_p, v.step.measured += step_m;
      v.alltoall_wall.predicted += model.alltoall_traffic_seconds(traffic);
    }
    v.alltoall_wall.measured += run.alltoall_seconds[it];
    ++v.iterations;
  }
  for (Term* t : {&v.rows, &v.compute, &v.alltoall_bytes, &v.sync_bytes, &v.step, &v.alltoall_wall}) {
    t->predicted /= v.iterations;
    t->measured /= v.iterations;
  }
  return v;
}

}  // namespace skew::placement
