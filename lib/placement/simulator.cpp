#include "lib/placement/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "lib/placement/deepspeed_capacity.hpp"
#include "lib/placement/shadowing.hpp"

namespace skew::placement {

namespace {

std::vector<double> to_double(const std::vector<std::int64_t>& counts) {
  return {counts.begin(), counts.end()};
}

void check_counts(const std::vector<std::int64_t>& counts, int gpus) {
  SKEW_CHECK(gpus >= 1 && !counts.empty() && counts.size() % static_cast<std::size_t>(gpus) == 0,
             counts.size() << " experts cannot be spread over " << gpus << " GPUs in equal blocks");
}

}  // namespace

double PolicySeries::mean_step() const {
  return step_seconds.empty() ? 0.0
                              : std::accumulate(step_seconds.begin(), step_seconds.end(), 0.0) /
                                    static_cast<double>(step_seconds.size());
}

double static_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus) {
  check_counts(counts, gpus);
  const auto p = LayerPlacement::block(static_cast<int>(counts.size()), gpus, static_cast<int>(counts.size()) / gpus);
  return model.predict(p, to_double(counts)).total();
}

double deepspeed_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus, double capacity_factor,
                      std::int64_t min_capacity, std::int64_t* dropped) {
  check_counts(counts, gpus);
  const double experts = static_cast<double>(counts.size());
  const double assignments = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}));
  // moe_train's capacity is per rank; under the uniform-source model every rank routes
  // assignments / gpus choices (counted once per choice, hence top_k 1), and an expert receives
  // its capacity from each of the gpus ranks.
  const std::int64_t capacity = capacity_factor > 0
                                    ? gpus * deepspeed_capacity(assignments / gpus, static_cast<int>(counts.size()), 1,
                                                                capacity_factor, min_capacity)
                                    : *std::max_element(counts.begin(), counts.end());
  if (dropped) {
    *dropped = 0;
    for (auto c : counts) *dropped += std::max<std::int64_t>(0, c - capacity);
  }
  // The fixed [E, C, M] buffer: every expert computes and ships C rows, real or padding.
  const double per_rank = experts / gpus * static_cast<double>(capacity);
  return model.scheduled_seconds(model.compute_seconds(per_rank),
                                 model.alltoall_seconds(std::vector<double>(static_cast<std::size_t>(gpus), per_rank)),
                                 gpus);
}

double fastermoe_step(const CostModel& decide, const CostModel& score, const std::vector<std::int64_t>& counts,
                      int gpus, int* shadows, double* balance) {
  check_counts(counts, gpus);
  const ShadowRouting routing = uniform_routing(counts, gpus);
  const ShadowDecision d = choose_shadows(decide, routing, decide.schedule());
  if (shadows) *shadows = static_cast<int>(d.shadowed.size());
  std::vector<char> mask(counts.size(), 0);
  for (int e : d.shadowed) mask[static_cast<std::size_t>(e)] = 1;
  return shadowed_seconds(score, routing, mask, score.schedule(), balance);
}

namespace {

// Seconds of link time per rank that the experts' exchange needs at least (ideal_step). Expert e
// computed on ranks spanning m nodes leaves the tokens of the other nodes' ranks to cross the
// network, and m > 1 nodes need its gradient reduced over m nodes: linear in m, so one node or
// every node is the cheapest. On one node the same holds for ranks and NVLink.
double least_exchange_per_rank(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus) {
  const CostConstants& c = model.constants();
  const int per_node = std::min(c.gpus_per_node, gpus), nodes = (gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  const double token_bytes = static_cast<double>(model.shape().hidden_dim) * model.shape().activation_bytes;
  const double rounds = 4;  // dispatch and combine, forward and backward
  double seconds = 0;
  for (auto count : counts) {
    const double from_each = static_cast<double>(count) / gpus;
    const double tokens = nodes == 1 ? rounds * token_bytes * from_each * (gpus - 1) / c.nvlink_bandwidth
                                     : rounds * token_bytes * from_each * (gpus - per_node) / c.alltoall_bandwidth;
    const double params = nodes == 1 ? 2.0 * (gpus - 1) * model.expert_grad_bytes() / c.nvlink_bandwidth
                                     : 2.0 * (nodes - 1) * model.expert_grad_bytes() / c.allreduce_bandwidth;
    seconds += std::min(tokens, params);
  }
  return seconds / gpus;
}

}  // namespace

double ideal_step(const CostModel& model, const std::vector<std::int64_t>& counts, int gpus) {
  const double per_rank = static_cast<double>(std::accumulate(counts.begin(), counts.end(), std::int64_t{0})) / gpus;
  const double compute = model.compute_seconds(per_rank);
  if (gpus <= 1) return compute;
  const ExchangeSchedule& schedule = model.schedule();
  const double latency = 4.0 * model.constants().alltoall_latency;
  const double exchange = least_exchange_per_rank(model, counts, gpus);
  if (schedule.overlap == Overlap::None) return compute + latency + exchange;
  // Pipelined: f(x, a) = x + a - (1 - 1/S) min(x, a), with the exchange's link time on either
  // side (a policy may sync replicas after its compute or exchange parameters instead of tokens);
  // the least f over the splits evens min(x, a) out as far as the exchange allows.
  const double a = latency + 4.0 * (schedule.stages - 1) * model.constants().stage_latency;
  const double whole = compute + a + exchange;
  const double most_overlap =
      compute >= a + exchange ? a + exchange : (a >= compute + exchange ? compute + exchange : whole / 2);
  return whole - (1.0 - 1.0 / schedule.stages) * most_overlap;
}

std::vector<PolicySeries> simulate(const RoutingTrace& trace, const SimSetup& setup) {
  SKEW_CHECK(!trace.empty(), "simulate: empty routing trace");
  const int layers = static_cast<int>(trace.front().size());
  const int experts = static_cast<int>(trace.front().front().size());
  check_counts(trace.front().front(), setup.gpus);
  const CostModel model(setup.constants, setup.shape, setup.schedule);
  const CostModel scorer(setup.scoring.value_or(setup.constants), setup.shape, setup.schedule);
  const int slots = setup.slots_per_rank > 0 ? setup.slots_per_rank : experts / setup.gpus + 1;
  std::vector<PolicySeries> out;
  for (const char* name : {"static", "deepspeed", "fastermoe", "flexmoe", "ideal"}) {
    out.emplace_back();
    out.back().policy = name;
  }
  FlexMoePolicy flex(model, layers, experts, setup.flexmoe);
  std::vector<LayerPlacement> placement(static_cast<std::size_t>(layers),
                                        LayerPlacement::block(experts, setup.gpus, slots));
  std::int64_t dropped_total = 0, assignments_total = 0;
  std::optional<PlanTracker> plans;
  if (setup.plan_stats) {
    plans.emplace(model, scorer, setup.flexmoe.live_shares, *setup.plan_stats);
    if (setup.plan_futures) plans->sample_futures(setup.plan_futures);
  }
  for (std::size_t it = 0; it < trace.size(); ++it) {
    const auto& counts = trace[it];
    SKEW_CHECK(static_cast<int>(counts.size()) == layers,
               "trace iteration " << it << " has " << counts.size() << " layers, expected " << layers);
    std::vector<LayerPlacement> next = flex.plan(static_cast<std::int64_t>(it), placement);
    double flex_time = 0;
    for (int l = 0; l < layers; ++l)
      flex_time += scorer.change_seconds(placement[static_cast<std::size_t>(l)], next[static_cast<std::size_t>(l)]);
    if (plans && next != placement) {
      std::vector<std::vector<double>> estimates;
      for (int l = 0; l < layers; ++l) estimates.push_back(flex.monitor().estimate(l));
      plans->planned(static_cast<std::int64_t>(it), placement, next, estimates, flex_time);
    }
    placement = std::move(next);
    if (plans) plans->step(counts);
    std::vector<double> time(out.size(), 0.0), balance(out.size(), 0.0);
    time[3] = flex_time;
    for (int l = 0; l < layers; ++l) {
      const auto& c = counts[static_cast<std::size_t>(l)];
      const auto load = to_double(c);
      std::int64_t dropped = 0;
      int shadows = 0;
      time[0] += static_step(scorer, c, setup.gpus);
      balance[0] += balance_ratio(model.rank_loads(LayerPlacement::block(experts, setup.gpus, slots), load));
      time[1] += deepspeed_step(scorer, c, setup.gpus, setup.capacity_factor, setup.min_capacity, &dropped);
      balance[1] += 1.0;  // padded: every rank computes the same number of rows
      dropped_total += dropped;
      assignments_total += std::accumulate(c.begin(), c.end(), std::int64_t{0});
      double shadow_balance = 1;
      time[2] += fastermoe_step(model, scorer, c, setup.gpus, &shadows, &shadow_balance);
      balance[2] += shadow_balance;
      out[2].changes += shadows;
      LayerPlacement p = placement[static_cast<std::size_t>(l)];
      if (setup.flexmoe.live_shares) assign_shares(p, load, true);
      time[3] += scorer.predict(p, load).total();
      balance[3] += balance_ratio(model.rank_loads(p, load));
      time[4] += ideal_step(scorer, c, setup.gpus);
      balance[4] += 1.0;
    }
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k].step_seconds.push_back(time[k]);
      out[k].balance.push_back(balance[k] / layers);
    }
    flex.observe(static_cast<std::int64_t>(it), counts, time[3]);
    for (const auto& change : flex.take_changes()) {
      ++out[3].changes;
      if (setup.change_log) setup.change_log->write(change.to_json());
    }
    if (setup.progress) setup.progress->update(static_cast<std::int64_t>(it) + 1);
  }
  if (plans) plans->finish();
  out[1].dropped_fraction =
      assignments_total ? static_cast<double>(dropped_total) / static_cast<double>(assignments_total) : 0.0;
  return out;
}

}  // namespace skew::placement
