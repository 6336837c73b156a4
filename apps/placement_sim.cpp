// placement_sim: replays a routing trace (recorded JSONL or generated with Zipf skew and drift)
// through the FlexMoE cost model for a simulated cluster and prints each policy's step time:
// static, deepspeed, fastermoe, flexmoe and the balanced ideal, at one size and optionally at a
// list of sizes (scaling rows). With sim.validate = moe_train metrics JSONL, run under mpirun
// with the recorded run's rank count instead: measures the cost-model constants here and
// compares predicted with measured expert compute and all-to-all time. With sim.calibrate = runs
// (moe_train metrics JSONL, comma-separated), fits the cost-model constants to those runs
// (lib/placement/calibration.hpp), reports the fitted model's error on the held-out runs of
// sim.calibrate_check and writes the constants (output.calibration) for sim.scoring, which scores
// every policy's simulated steps with them instead of with the planners' own model.
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "lib/moe/placement_config.hpp"
#include "lib/placement/calibration.hpp"
#include "lib/placement/simulator.hpp"
#include "lib/placement/validate.hpp"
#include "mpi/runtime.hpp"

using namespace skew;
using namespace skew::placement;

namespace {

Schema make_schema() {
  Schema s("placement_sim", "Trace-driven simulation of MoE expert placement policies on a modelled cluster");
  moe::add_placement_keys(s);
  s.add_int("sim.gpus", 64, {1, 1 << 16}, "GPUs (ranks) of the simulated cluster")
      .add_int("sim.experts_per_gpu", 1, {1, 1024}, "experts per GPU in the block placement (experts = gpus x this)")
      .add_int("sim.layers", 2, {1, 1024}, "MoE layers")
      .add_int("sim.iterations", 200, {1, 1 << 24}, "iterations to generate (a recorded trace sets its own)")
      .add_int("sim.tokens_per_gpu", 4096, {1, 1 << 24}, "tokens per GPU per iteration")
      .add_int("sim.top_k", 2, {1, 64}, "experts per token")
      .add_int("sim.hidden", 1024, {1, 1 << 20}, "model width (token activation size)")
      .add_int("sim.ffn_hidden", 4096, {1, 1 << 20},
               "expert FFN inner width; an expert has 2 x hidden x ffn_hidden parameters")
      .add_float("sim.zipf", 0.3, FloatRange::at_least(0),
                 "generated trace: popularity of the i-th hottest expert ~ 1 / i^zipf")
      .add_float("sim.drift", 0.05, {0, 1},
                 "generated trace: per-iteration probability that two experts adjacent in popularity order swap")
      .add_float("sim.noise", 1.0, FloatRange::at_least(0),
                 "generated trace: multiplier of the sqrt(count) sampling noise")
      .add_int("sim.seed", 1, IntRange::at_least(0), "generated trace seed")
      .add_string("sim.trace", "", "routing trace JSONL to replay instead of generating (moe_train metrics)")
      .add_string("sim.trace_key", "tokens_per_expert", "JSONL key holding [layer][expert] counts")
      .add_float("sim.capacity_factor", 0.0, FloatRange::at_least(0),
                 "deepspeed capacity factor; 0 = drop_tokens=false, padding to the max count; with a factor, "
                 "each expert takes gpus x max(ceil(assignments / gpus / experts * factor), sim.min_capacity) "
                 "rows, moe_train's per-rank capacity")
      .add_int("sim.min_capacity", 4, {0, kMaxInt32},
               "deepspeed: least slots per expert and rank (as moe.min_capacity)")
      .add_int("sim.fastermoe_groups", 4, {1, 1024},
               "fastermoe smart scheduling: chunks overlapping all-to-all with compute (1 = none)")
      .add_string("sim.scaling", "", "comma-separated GPU counts for scaling rows (generated traces), e.g. 8,64,1024")
      .add_int("sim.scaling_iterations", 60, {1, 1 << 24}, "iterations per scaling row")
      .add_string("sim.validate", "",
                  "moe_train metrics JSONL to check the cost model against (run with its rank count)")
      .add_string("output.validation", "", "validation result as one JSON line")
      .add_string("sim.calibrate", "",
                  "moe_train metrics JSONL runs (comma-separated) to fit the cost constants to; then no simulation")
      .add_string("sim.calibrate_check", "",
                  "held-out moe_train runs (comma-separated) the fitted constants are checked on, term by term")
      .add_string("output.calibration", "", "fitted cost constants as JSON (the file sim.scoring reads)")
      .add_string("sim.scoring", "",
                  "cost constants JSON (output.calibration) every policy's step is scored with; empty = the "
                  "planners' own model (placement.* and the cluster defaults)")
      .add_bool("sim.verbose", false, "log every flexmoe placement change on stdout")
      .add_string("output.changes", "",
                  "flexmoe placement changes of the headline run (JSONL: iteration, op, expert, ranks, gains)")
      .add_string("output.steps_csv", "", "per-iteration step time and balance ratio per policy (CSV)")
      .add_string("output.summary_csv", "", "mean step time per policy, headline size and scaling rows (CSV)")
      .add_string("output.table", "", "markdown table of the results beside the paper's headline");
  return s;
}

// Unset cluster constants (0; latency -1) take these simulated-cluster defaults (A100-class GPU,
// NVLink, 200 Gb/s network per GPU, 20 us per all-to-all round) instead of being measured: the simulator describes a
// cluster it does not run on.
CostConstants cluster_constants(const PlacementOptions& options) {
  CostConstants c = options.cost_overrides;
  if (c.gemm_flops <= 0) c.gemm_flops = 100e12;
  if (c.intra_bandwidth <= 0) c.intra_bandwidth = 150e9;
  if (c.inter_bandwidth <= 0) c.inter_bandwidth = 25e9;
  if (c.allreduce_bandwidth <= 0) c.allreduce_bandwidth = 25e9;
  if (c.alltoall_latency < 0) c.alltoall_latency = 20e-6;
  return c;
}

SimSetup make_setup(const Config& cfg, int gpus) {
  const PlacementOptions options = moe::placement_options_from_config(cfg);
  SimSetup s;
  s.constants = cluster_constants(options);
  const std::int64_t hidden = cfg.get_int("sim.hidden"), ffn = cfg.get_int("sim.ffn_hidden");
  s.shape = options.shape;
  s.shape.params = 2 * hidden * ffn;
  s.shape.hidden_dim = static_cast<int>(hidden);
  s.gpus = gpus;
  s.slots_per_rank = options.slots_per_rank;
  s.capacity_factor = cfg.get_float("sim.capacity_factor");
  s.min_capacity = cfg.get_int("sim.min_capacity");
  s.fastermoe_groups = cfg.get_int_as<int>("sim.fastermoe_groups");
  s.flexmoe = options.flexmoe;
  if (!cfg.get_string("sim.scoring").empty()) s.scoring = read_constants_json(cfg.get_string("sim.scoring"));
  return s;
}

RoutingTrace generated(const Config& cfg, int gpus, int iterations) {
  TraceSpec t;
  t.iterations = iterations;
  t.layers = cfg.get_int_as<int>("sim.layers");
  t.experts = gpus * cfg.get_int_as<int>("sim.experts_per_gpu");
  if (cfg.get_int("sim.top_k") > t.experts)
    SKEW_THROW("sim.top_k " << cfg.get_int("sim.top_k") << " is more than the " << t.experts
                            << " experts (sim.gpus x sim.experts_per_gpu at " << gpus << " GPUs)");
  t.assignments = cfg.get_int("sim.tokens_per_gpu") * cfg.get_int("sim.top_k") * gpus;
  t.zipf = cfg.get_float("sim.zipf");
  t.drift = cfg.get_float("sim.drift");
  t.noise = cfg.get_float("sim.noise");
  t.seed = cfg.get_int_as<std::uint64_t>("sim.seed");
  return generate_trace(t);
}

const PolicySeries& find(const std::vector<PolicySeries>& r, const std::string& name) {
  for (const auto& s : r)
    if (s.policy == name) return s;
  SKEW_THROW("no policy " << name);
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

void summary_rows(CsvWriter* csv, int gpus, double trace_balance, const std::vector<PolicySeries>& r) {
  const double ideal = find(r, "ideal").mean_step();
  for (const auto& s : r)
    if (csv)
      csv->row({std::to_string(gpus), s.policy, csv_number(s.mean_step() * 1e3), csv_number(mean(s.balance)),
                csv_number(trace_balance), csv_number(s.mean_step() / ideal), csv_number(s.dropped_fraction),
                std::to_string(s.changes)});
}

}  // namespace

int simulate_main(const Config& cfg) {
  {
    const int gpus = cfg.get_int_as<int>("sim.gpus");
    const auto sizes = cfg.get_int_list("sim.scaling");
    for (auto g : sizes)
      if (g < 1 || g > 1 << 16)
        SKEW_THROW(cfg.source("sim.scaling") << ": GPU count " << g << " in key 'sim.scaling' is not in [1, 65536]");
    const std::string trace_path = cfg.get_string("sim.trace");
    const RoutingTrace trace = trace_path.empty() ? generated(cfg, gpus, cfg.get_int_as<int>("sim.iterations"))
                                                  : read_trace_jsonl(trace_path, cfg.get_string("sim.trace_key"));
    if (!trace_path.empty()) check_trace_fits_ranks(trace, trace_path, gpus, "sim.gpus", cfg.source("sim.gpus"));
    const double trace_balance = trace_balance_ratio(trace, gpus);
    log::set_level(cfg.get_bool("sim.verbose") ? log::Level::Info : log::Level::Warn);
    JsonlWriter changes(cfg.get_string("output.changes"));
    SimSetup setup = make_setup(cfg, gpus);
    setup.change_log = &changes;
    const auto results = simulate(trace, setup);

    const double ds = find(results, "deepspeed").mean_step(), fm = find(results, "fastermoe").mean_step();
    const double fx = find(results, "flexmoe").mean_step(), ideal = find(results, "ideal").mean_step();
    std::ostringstream table;
    table << "| policy | step ms | balance max/mean | vs ideal | flexmoe speedup |\n|---|---|---|---|---|\n"
          << std::fixed;
    for (const auto& s : results)
      table << "| " << s.policy << " | " << std::setprecision(3) << s.mean_step() * 1e3 << " | " << mean(s.balance)
            << " | " << s.mean_step() / ideal << " | " << std::setprecision(2) << s.mean_step() / fx << "x |\n";
    table << "\nflexmoe over deepspeed " << std::setprecision(2) << ds / fx << "x (paper: 1.70x avg), over fastermoe "
          << fm / fx << "x (paper: 1.30x avg); " << gpus << " GPUs, " << trace.size()
          << " iterations, trace balance ratio " << trace_balance << " (static placement); flexmoe planner variant "
          << cfg.get_string("placement.flexmoe_variant") << "; steps scored with "
          << (setup.scoring ? "the calibrated constants of " + cfg.get_string("sim.scoring")
                            : std::string("the planners' own model (no sim.scoring)"))
          << "\n";

    std::unique_ptr<CsvWriter> summary;
    if (!cfg.get_string("output.summary_csv").empty())
      summary =
          std::make_unique<CsvWriter>(cfg.get_string("output.summary_csv"),
                                      std::vector<std::string>{"gpus", "policy", "step_ms", "balance", "trace_balance",
                                                               "vs_ideal", "dropped_fraction", "changes"});
    summary_rows(summary.get(), gpus, trace_balance, results);
    if (!cfg.get_string("output.steps_csv").empty()) {
      CsvWriter steps(cfg.get_string("output.steps_csv"), {"iteration", "policy", "step_ms", "balance"});
      for (const auto& s : results)
        for (std::size_t i = 0; i < s.step_seconds.size(); ++i)
          steps.row({std::to_string(i), s.policy, csv_number(s.step_seconds[i] * 1e3), csv_number(s.balance[i])});
      steps.close();
    }
    Json scaling = Json::array();
    if (!sizes.empty()) {
      table << "\n| GPUs | trace balance | static ms | deepspeed ms | fastermoe ms | flexmoe ms | ideal ms | vs "
               "deepspeed | vs fastermoe | flexmoe/ideal |\n"
            << "|---|---|---|---|---|---|---|---|---|---|\n";
      for (auto g : sizes) {
        const auto t = generated(cfg, static_cast<int>(g), cfg.get_int_as<int>("sim.scaling_iterations"));
        const auto r = simulate(t, make_setup(cfg, static_cast<int>(g)));
        const double tb = trace_balance_ratio(t, static_cast<int>(g));
        summary_rows(summary.get(), static_cast<int>(g), tb, r);
        const double f = find(r, "flexmoe").mean_step();
        table << "| " << g << " | " << std::setprecision(2) << tb << std::setprecision(3);
        for (const char* p : {"static", "deepspeed", "fastermoe", "flexmoe", "ideal"})
          table << " | " << find(r, p).mean_step() * 1e3;
        table << std::setprecision(2) << " | " << find(r, "deepspeed").mean_step() / f << "x | "
              << find(r, "fastermoe").mean_step() / f << "x | " << f / find(r, "ideal").mean_step() << " |\n";
        scaling.push_back({{"gpus", g},
                           {"flexmoe_vs_deepspeed", find(r, "deepspeed").mean_step() / f},
                           {"flexmoe_vs_fastermoe", find(r, "fastermoe").mean_step() / f}});
      }
    }
    if (summary) summary->close();
    changes.close();
    write_stdout(table.str(), "the results table");
    if (!cfg.get_string("output.table").empty()) write_file_atomic(cfg.get_string("output.table"), table.str());
    Json j;
    j["app"] = "placement_sim";
    j["gpus"] = gpus;
    j["iterations"] = trace.size();
    j["trace_balance"] = trace_balance;
    j["scoring"] = setup.scoring ? cfg.get_string("sim.scoring") : "planner model";
    for (const auto& s : results) j["step_ms"][s.policy] = s.mean_step() * 1e3;
    j["flexmoe_vs_deepspeed"] = ds / fx;
    j["flexmoe_vs_fastermoe"] = fm / fx;
    j["flexmoe_vs_ideal"] = fx / ideal;
    j["flexmoe_changes"] = find(results, "flexmoe").changes;
    j["flexmoe_variant"] = cfg.get_string("placement.flexmoe_variant");
    j["scaling"] = scaling;
    print_summary(j);
    return 0;
  }
}

// moe_train's expert: two matrices and two bias vectors.
ExpertShape measured_expert_shape(const Config& cfg, const PlacementOptions& options) {
  const std::int64_t hidden = cfg.get_int("sim.hidden"), ffn = cfg.get_int("sim.ffn_hidden");
  ExpertShape shape = options.shape;
  shape.params = 2 * hidden * ffn + hidden + ffn;
  shape.hidden_dim = static_cast<int>(hidden);
  return shape;
}

// Measured constants of this machine against a recorded moe_train run at world.size() ranks,
// term by term (see lib/placement/validate.hpp).
int validate_main(const Config& cfg, comm::ProcessGroup& world) {
  const MeasuredRun run = read_measured_jsonl(cfg.get_string("sim.validate"));
  const PlacementOptions options = moe::placement_options_from_config(cfg);
  const ExpertShape shape = measured_expert_shape(cfg, options);
  const CostConstants constants = measure_constants(world, options.cost_overrides, shape);
  if (world.rank() != 0) return 0;
  const CostModel model(constants, shape);
  const Validation v = validate_cost_model(model, run, world.size(), options.flexmoe.live_shares);
  std::cout << std::fixed << std::setprecision(3) << "cost model vs " << cfg.get_string("sim.validate") << " at "
            << world.size() << " ranks, " << v.iterations << " iterations (measured here: gemm "
            << constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all " << constants.inter_bandwidth / 1e9 << " GB/s + "
            << constants.alltoall_latency * 1e6 << " us a round)\n";
  Json j{{"app", "placement_sim"},
         {"validate", cfg.get_string("sim.validate")},
         {"ranks", world.size()},
         {"iterations", v.iterations},
         {"gemm_flops", constants.gemm_flops},
         {"alltoall_bandwidth", constants.inter_bandwidth},
         {"alltoall_latency", constants.alltoall_latency}};
  for (const auto& [name, term, scale] :
       {std::tuple{"busiest_rows", v.rows, 1.0}, std::tuple{"compute_ms", v.compute, 1e3},
        std::tuple{"alltoall_bytes", v.alltoall_bytes, 1.0}, std::tuple{"sync_bytes", v.sync_bytes, 1.0},
        std::tuple{"modelled_step_ms", v.step, 1e3}, std::tuple{"alltoall_wall_ms", v.alltoall_wall, 1e3}}) {
    std::cout << "  " << std::setw(18) << std::left << name << " predicted " << term.predicted * scale << ", measured "
              << term.measured * scale << ", error " << term.error() * 100 << "%\n";
    j[name] = {{"predicted", term.predicted * scale}, {"measured", term.measured * scale}, {"error", term.error()}};
  }
  if (!cfg.get_string("output.validation").empty())
    write_file_atomic(cfg.get_string("output.validation"), j.dump() + "\n");
  print_summary(j);
  return 0;
}

// Fits the constants to the sim.calibrate runs and checks them on the sim.calibrate_check runs.
int calibrate_main(const Config& cfg) {
  const PlacementOptions options = moe::placement_options_from_config(cfg);
  const ExpertShape shape = measured_expert_shape(cfg, options);
  std::vector<MeasuredRun> fit_runs;
  for (const std::string& path : cfg.get_string_list("sim.calibrate")) fit_runs.push_back(read_measured_jsonl(path));
  const CalibrationFit fit = fit_constants(fit_runs, shape, cluster_constants(options));
  const CostModel model(fit.constants, shape);
  std::cout << std::setprecision(4) << "fitted to " << fit_runs.size() << " runs (" << fit.compute_samples
            << " compute records, " << fit.alltoall_samples << " all-to-all iterations): gemm "
            << fit.constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all " << fit.constants.inter_bandwidth / 1e9
            << " GB/s + " << fit.constants.alltoall_latency * 1e6 << " us a round\n";
  Json checks = Json::array();
  for (const std::string& path : cfg.get_string_list("sim.calibrate_check")) {
    const MeasuredRun run = read_measured_jsonl(path);
    const int ranks = static_cast<int>(run.rows.back().size());
    const Validation v = validate_cost_model(model, run, ranks, options.flexmoe.live_shares);
    std::cout << "  held out " << path << " (" << ranks << " ranks): compute error " << v.compute.error() * 100
              << "%, all-to-all wall error " << v.alltoall_wall.error() * 100 << "%\n";
    checks.push_back(
        {{"run", path},
         {"ranks", ranks},
         {"iterations", v.iterations},
         {"compute_ms", {{"predicted", v.compute.predicted * 1e3}, {"measured", v.compute.measured * 1e3}}},
         {"compute_error", v.compute.error()},
         {"alltoall_wall_ms",
          {{"predicted", v.alltoall_wall.predicted * 1e3}, {"measured", v.alltoall_wall.measured * 1e3}}},
         {"alltoall_wall_error", v.alltoall_wall.error()}});
  }
  const Json constants = constants_to_json(fit.constants);
  if (!cfg.get_string("output.calibration").empty())
    write_file_atomic(cfg.get_string("output.calibration"), constants.dump(1) + "\n");
  print_summary(Json{{"app", "placement_sim"}, {"calibration", constants}, {"held_out", checks}});
  return 0;
}

int main(int argc, char** argv) {
  return comm::run_main(argc, argv, false, [&](comm::Runtime& rt) {
    const Schema schema = make_schema();
    const Config cfg = Config::parse(schema, argc, argv);
    if (cfg.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    if (!cfg.get_string("sim.validate").empty()) return validate_main(cfg, *rt.world);
    if (!cfg.get_string("sim.calibrate").empty()) return rt.world_rank == 0 ? calibrate_main(cfg) : 0;
    return rt.world_rank == 0 ? simulate_main(cfg) : 0;
  });
}
