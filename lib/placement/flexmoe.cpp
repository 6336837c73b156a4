#include "lib/placement/flexmoe.hpp"

#include "lib/core/config.hpp"
#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
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
  SKEW_CHECK(options_.interval >= 0, "placement.interval must be >= 0, got " << options_.interval);
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
  if (monitor_.empty()) return current;
  SKEW_CHECK(current.size() == static_cast<std::size_t>(monitor_.num_layers()),
             "plan: " << current.size() << " layer placements for " << monitor_.num_layers() << " MoE layers");
  bool due = options_.interval > 0 && iteration % options_.interval == 0;
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
                                << (c.other_expert >= 0 ? " (slot of expert " : "")
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
  const std::vector<double> constants = {c.gemm_flops,          c.intra_bandwidth,  c.inter_bandwidth,
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
                      .intra_bandwidth = c[1],
                      .inter_bandwidth = c[2],
                      .allreduce_bandwidth = c[3],
                      .gpus_per_node = static_cast<int>(c[5]),
                      .alltoall_latency = c[4]},
                     model_.shape());
  waiting_.clear();
}

std::vector<LoggedChange> FlexMoePolicy::take_changes() {
  std::vector<LoggedChange> out;
  out.swap(done_);
  return out;
}

void add_placement_keys(Schema& schema) {
  schema.add_int("placement.slots_per_rank", 0, "expert slots per rank (memory budget); 0 = experts per rank + 1")
      .add_float("placement.threshold", 1.2, "re-plan when a layer's predicted max/mean rank load exceeds this")
      .add_int("placement.interval", 50,
               "also re-plan every this many iterations; amortisation horizon of a change (0 = threshold only)")
      .add_float("placement.smoothing", 0.3,
                 "exponential smoothing of the per-expert load estimate, in [0, 1): estimate = smoothing x "
                 "estimate + (1 - smoothing) x counts")
      .add_int("placement.max_ops", 0, "greedy expand/shrink/migrate steps per layer per plan; 0 = until none pays off")
      .add_float("placement.hedge", 0.02,
                 "fill free slots with replicas of the hottest experts while each costs at most this fraction of "
                 "the predicted step (gradient sync, amortised move): spare replicas let live shares absorb load "
                 "shifts the estimate has not seen; 0 = off")
      .add_choice("placement.shares", "live", {"live", "balanced", "even"},
                  "token split among replicas: live (the planner's replica sets, shares re-levelled every step "
                  "from that step's counts), balanced (shares levelling the ranks' predicted loads, fixed between "
                  "plans) or even")
      .add_float("placement.gemm_flops", 0, "expert GEMM throughput per rank, FLOP/s; 0 = measure at start-up")
      .add_float("placement.alltoall_bandwidth", 0, "per-rank all-to-all bandwidth across nodes, bytes/s; 0 = measure")
      .add_float("placement.nvlink_bandwidth", 0, "per-rank bandwidth inside a node, bytes/s; 0 = measure")
      .add_float("placement.allreduce_bandwidth", 0,
                 "bus bandwidth of replica gradient all-reduce across nodes, bytes/s; 0 = measure")
      .add_float("placement.alltoall_latency", -1, "fixed seconds per all-to-all round; -1 = measure at start-up")
      .add_int("placement.gpus_per_node", 8, "ranks per node: pairs inside one node use nvlink_bandwidth")
      .add_int("placement.activation_bytes", 4, "bytes per activation element sent in the all-to-all")
      .add_int("placement.grad_bytes_per_param", 4, "bytes per gradient element in the replica all-reduce")
      .add_int("placement.state_bytes_per_param", 12,
               "bytes moved per parameter with a replica (parameter + optimiser moments)");
}

CostConstants cost_overrides_from_config(const Config& config) {
  CostConstants c;
  c.gemm_flops = config.get_float("placement.gemm_flops");
  c.inter_bandwidth = config.get_float("placement.alltoall_bandwidth");
  c.intra_bandwidth = config.get_float("placement.nvlink_bandwidth");
  c.allreduce_bandwidth = config.get_float("placement.allreduce_bandwidth");
  c.gpus_per_node = static_cast<int>(config.get_int("placement.gpus_per_node"));
  c.alltoall_latency = config.get_float("placement.alltoall_latency");
  SKEW_CHECK(c.gpus_per_node >= 1, "placement.gpus_per_node must be >= 1, got " << c.gpus_per_node);
  return c;
}

ExpertShape expert_shape_from_config(const Config& config, std::int64_t expert_params, int hidden_dim) {
  ExpertShape s;
  s.params = expert_params;
  s.hidden_dim = hidden_dim;
  s.activation_bytes = static_cast<int>(config.get_int("placement.activation_bytes"));
  s.grad_bytes_per_param = static_cast<int>(config.get_int("placement.grad_bytes_per_param"));
  s.state_bytes_per_param = static_cast<int>(config.get_int("placement.state_bytes_per_param"));
  return s;
}

FlexMoeOptions flexmoe_options_from_config(const Config& config) {
  FlexMoeOptions o;
  o.threshold = config.get_float("placement.threshold");
  o.interval = static_cast<int>(config.get_int("placement.interval"));
  o.smoothing = config.get_float("placement.smoothing");
  o.planner.interval = o.interval > 0 ? o.interval : 50;
  o.planner.max_ops = static_cast<int>(config.get_int("placement.max_ops"));
  o.planner.balanced_shares = config.get_string("placement.shares") != "even";
  o.live_shares = config.get_string("placement.shares") == "live";
  o.planner.hedge = config.get_float("placement.hedge");
  SKEW_CHECK(o.planner.hedge >= 0, "placement.hedge must be >= 0, got " << o.planner.hedge);
  return o;
}

int slots_per_rank_from_config(const Config& config, int num_experts, int world_size) {
  const auto slots = config.get_int("placement.slots_per_rank");
  SKEW_CHECK(slots >= 0, "placement.slots_per_rank must be >= 0, got " << slots);
  SKEW_CHECK(world_size >= 1 && num_experts % world_size == 0,
             "moe.num_experts " << num_experts << " must be a multiple of the " << world_size << " ranks");
  return slots > 0 ? static_cast<int>(slots) : num_experts / world_size + 1;
}

std::unique_ptr<PlacementPolicy> make_flexmoe_policy(const Config& config, comm::ProcessGroup& world, int num_layers,
                                                     int num_experts, std::int64_t expert_params, int hidden_dim) {
  const ExpertShape shape = expert_shape_from_config(config, expert_params, hidden_dim);
  const CostConstants constants = measure_constants(world, cost_overrides_from_config(config), shape);
  SKEW_INFO("placement cost model: gemm " << constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all "
                                          << constants.inter_bandwidth / 1e9 << " GB/s, intra-node "
                                          << constants.intra_bandwidth / 1e9 << " GB/s, all-reduce "
                                          << constants.allreduce_bandwidth / 1e9 << " GB/s");
  return std::make_unique<FlexMoePolicy>(CostModel(constants, shape), num_layers, num_experts,
                                         flexmoe_options_from_config(config));
}

}  // namespace skew::placement
