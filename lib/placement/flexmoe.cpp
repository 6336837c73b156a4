#include "lib/placement/flexmoe.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "mpi/process_group.hpp"

namespace skew::placement {

Json LoggedChange::to_json() const {
  Json j;
  j["iteration"] = change.iteration;
  j["layer"] = change.layer;
  j["op"] = change.op;
  j["expert"] = change.expert;
  j["from_rank"] = change.from_rank;
  j["to_rank"] = change.to_rank;
  if (change.other_expert >= 0) j["other_expert"] = change.other_expert;
  j["predicted_gain_s"] = change.predicted_gain;
  j["change_s"] = change.change_seconds;
  j["step_s_before"] = step_seconds_before;
  j["step_s_after"] = step_seconds_after;
  return j;
}

FlexMoePolicy::FlexMoePolicy(CostModel model, int num_layers, int num_experts, FlexMoeOptions options)
    : model_(std::move(model)), monitor_(num_layers, num_experts, options.smoothing), options_(options) {
  SKEW_CHECK(options_.threshold >= 1.0,
             "placement.threshold must be >= 1 (a balance ratio), got " << options_.threshold);
  SKEW_CHECK(options_.warmup >= 1, "placement.warmup must be >= 1, got " << options_.warmup);
  SKEW_CHECK(options_.planner.interval >= 1, "the planner's horizon must be >= 1, got " << options_.planner.interval);
}

void FlexMoePolicy::observe(std::int64_t /*iteration*/, const RoutingCounts& counts, double step_seconds) {
  monitor_.observe(counts);
  last_step_seconds_ = step_seconds;
  for (auto& c : waiting_) {
    c.step_seconds_after = step_seconds;
    done_.push_back(std::move(c));
  }
  waiting_.clear();
}

std::vector<LayerPlacement> FlexMoePolicy::plan(std::int64_t iteration, const std::vector<LayerPlacement>& current) {
  // The first plan right after the warm-up, then one every horizon iterations: a change is
  // amortised over exactly the iterations it lives before the next plan may undo it.
  const std::int64_t since_warmup = monitor_.observations() - options_.warmup;
  if (since_warmup < 0 || since_warmup % options_.planner.interval != 0) return current;
  SKEW_CHECK(current.size() == static_cast<std::size_t>(monitor_.num_layers()),
             "plan: " << current.size() << " layer placements for " << monitor_.num_layers() << " MoE layers");
  bool due = false;
  for (std::size_t l = 0; l < current.size() && !due; ++l)
    due = balance_ratio(model_.rank_loads(current[l], monitor_.estimate(static_cast<int>(l)))) > options_.threshold;
  if (!due) return current;
  ++plans_run_;
  std::vector<LayerPlacement> next;
  for (std::size_t l = 0; l < current.size(); ++l) {
    const auto& load = monitor_.estimate(static_cast<int>(l));
    LayerPlan plan = plan_layer(model_, current[l], load, options_.planner);
    for (auto& c : plan.changes) {
      c.iteration = iteration;
      c.layer = static_cast<int>(l);
      SKEW_INFO("placement it " << iteration << " layer " << l << ": " << c.op << " expert " << c.expert << " ranks "
                                << c.from_rank << " -> " << c.to_rank
                                << (c.other_expert < 0  ? ""
                                    : c.op == "migrate" ? " (exchanged with expert "
                                                        : " (slot of expert ")
                                << (c.other_expert >= 0 ? std::to_string(c.other_expert) + ")" : "") << " gain "
                                << c.predicted_gain * 1e3 << " ms/it, cost " << c.change_seconds * 1e3 << " ms");
      waiting_.push_back({c, last_step_seconds_, -1});
    }
    next.push_back(std::move(plan.placement));
  }
  return next;
}

std::vector<std::pair<std::string, Tensor>> FlexMoePolicy::save_state() const {
  const int L = monitor_.num_layers();
  const std::int64_t E = static_cast<std::int64_t>(monitor_.estimate(0).size());
  std::vector<double> estimate;
  std::vector<std::int64_t> last;
  for (int l = 0; l < L; ++l) {
    estimate.insert(estimate.end(), monitor_.estimate(l).begin(), monitor_.estimate(l).end());
    last.insert(last.end(), monitor_.last(l).begin(), monitor_.last(l).end());
  }
  const CostConstants& c = model_.constants();
  const std::vector<double> constants = {c.gemm_flops,          c.nvlink_bandwidth, c.alltoall_bandwidth,
                                         c.allreduce_bandwidth, c.alltoall_latency, double(c.gpus_per_node)};
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("flexmoe.monitor_estimate", Tensor::from_vector(estimate, {L, E}));
  out.emplace_back("flexmoe.monitor_last", Tensor::from_vector(last, {L, E}));
  out.emplace_back("flexmoe.counters",
                   Tensor::from_vector(std::vector<std::int64_t>{monitor_.observations(), plans_run_}, {2}));
  out.emplace_back("flexmoe.cost_constants", Tensor::from_vector(constants, {6}));
  return out;
}

void FlexMoePolicy::load_state(const TensorFile& file) {
  const auto values = [&]<class T>(const std::string& name, std::size_t count, T) {
    const Tensor& t = file.get(name);
    SKEW_CHECK(t.dtype() == dtype_of<T>() && t.numel() == count,
               "checkpoint tensor " << name << " is " << dtype_name(t.dtype()) << " with " << t.numel()
                                    << " values, flexmoe needs " << dtype_name(dtype_of<T>()) << " with " << count);
    return std::vector<T>(t.data<T>(), t.data<T>() + count);
  };
  const std::size_t cells = static_cast<std::size_t>(monitor_.num_layers()) * monitor_.estimate(0).size();
  const auto counters = values("flexmoe.counters", 2, std::int64_t{});
  monitor_.restore(values("flexmoe.monitor_estimate", cells, 0.0),
                   values("flexmoe.monitor_last", cells, std::int64_t{}), counters[0]);
  plans_run_ = counters[1];
  const auto c = values("flexmoe.cost_constants", 6, 0.0);
  model_ = CostModel({.gemm_flops = c[0],
                      .nvlink_bandwidth = c[1],
                      .alltoall_bandwidth = c[2],
                      .allreduce_bandwidth = c[3],
                      .gpus_per_node = static_cast<int>(c[5]),
                      .alltoall_latency = c[4],
                      .stage_latency = model_.constants().stage_latency},
                     model_.shape(), model_.schedule());
  waiting_.clear();
}

std::vector<LoggedChange> FlexMoePolicy::take_changes() {
  std::vector<LoggedChange> out;
  out.swap(done_);
  return out;
}

std::unique_ptr<FlexMoePolicy> make_flexmoe_policy(const PlacementOptions& options, comm::ProcessGroup& world,
                                                   int num_layers, int num_experts, std::int64_t expert_params,
                                                   int hidden_dim) {
  ExpertShape shape = options.shape;
  shape.params = expert_params;
  shape.hidden_dim = hidden_dim;
  const CostConstants constants = measure_constants(world, options.cost_overrides, shape);
  SKEW_INFO("placement cost model: gemm " << constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all "
                                          << constants.alltoall_bandwidth / 1e9 << " GB/s, intra-node "
                                          << constants.nvlink_bandwidth / 1e9 << " GB/s, all-reduce "
                                          << constants.allreduce_bandwidth / 1e9 << " GB/s");
  return std::make_unique<FlexMoePolicy>(CostModel(constants, shape), num_layers, num_experts, options.flexmoe);
}

}  // namespace skew::placement
