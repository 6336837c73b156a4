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
#include <utility>

#include "apps/placement_sim_options.hpp"
#include "apps/run_dir.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/progress.hpp"
#include "lib/placement/calibration.hpp"
#include "lib/placement/simulator.hpp"
#include "lib/placement/validate.hpp"
#include "mpi/runtime.hpp"

using namespace skew;
using namespace skew::placement;

namespace {

// Unset cluster constants (0; latency -1) take these simulated-cluster defaults (A100-class GPU,
// NVLink, 200 Gb/s network per GPU, 20 us per all-to-all round) instead of being measured: the simulator describes a
// cluster it does not run on.
CostConstants cluster_constants(const PlacementOptions& options) {
  CostConstants c = options.cost_overrides;
  if (c.gemm_flops <= 0) c.gemm_flops = 100e12;
  if (c.nvlink_bandwidth <= 0) c.nvlink_bandwidth = 150e9;
  if (c.alltoall_bandwidth <= 0) c.alltoall_bandwidth = 25e9;
  if (c.allreduce_bandwidth <= 0) c.allreduce_bandwidth = 25e9;
  if (c.alltoall_latency < 0) c.alltoall_latency = 20e-6;
  return c;
}

// The exchange schedule every policy gets under `overlap`: pipelined in sim.stages stages.
ExchangeSchedule schedule_of(const SimSection& sim, Overlap overlap) {
  return {overlap, overlap == Overlap::Pipelined ? sim.stages : 1};
}

Overlap headline_overlap(const SimSection& sim) {
  return sim.overlap == "none" ? Overlap::None : Overlap::Pipelined;
}

constexpr Overlap kOverlaps[] = {Overlap::None, Overlap::Pipelined};

SimSetup make_setup(const PlacementSimOptions& o, int gpus, Overlap overlap) {
  const PlacementOptions options = placement_options(o.placement);
  SimSetup s;
  s.constants = cluster_constants(options);
  const std::int64_t hidden = o.sim.hidden, ffn = o.sim.ffn_hidden;
  s.shape = options.shape;
  s.shape.params = 2 * hidden * ffn;
  s.shape.hidden_dim = static_cast<int>(hidden);
  s.gpus = gpus;
  s.slots_per_rank = options.slots_per_rank;
  s.capacity_factor = o.sim.capacity_factor;
  s.min_capacity = o.sim.min_capacity;
  s.schedule = schedule_of(o.sim, overlap);
  s.flexmoe = options.flexmoe;
  if (!o.sim.scoring.empty()) s.scoring = read_constants_json(o.sim.scoring);
  return s;
}

TraceSpec generated_spec(const SimSection& sim, int gpus, int iterations) {
  TraceSpec t;
  t.iterations = iterations;
  t.layers = sim.layers;
  t.experts = gpus * sim.experts_per_gpu;
  if (sim.top_k > t.experts)
    SKEW_THROW("sim.top_k " << sim.top_k << " is more than the " << t.experts
                            << " experts (sim.gpus x sim.experts_per_gpu at " << gpus << " GPUs)");
  t.assignments = sim.tokens_per_gpu * sim.top_k * gpus;
  t.zipf = sim.zipf;
  t.drift = sim.drift;
  t.noise = sim.noise;
  t.seed = sim.seed;
  return t;
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

void summary_rows(CsvWriter* csv, int gpus, Overlap overlap, double trace_balance, const std::vector<PolicySeries>& r) {
  const double ideal = find(r, "ideal").mean_step();
  for (const auto& s : r)
    if (csv)
      csv->row({std::to_string(gpus), overlap_name(overlap), s.policy, csv_number(s.mean_step() * 1e3),
                csv_number(mean(s.balance)), csv_number(trace_balance), csv_number(s.mean_step() / ideal),
                csv_number(s.dropped_fraction), std::to_string(s.changes)});
}

std::string schedule_title(const SimSection& sim, Overlap overlap) {
  return overlap == Overlap::None ? std::string("overlap none (all-to-all after compute)")
                                  : "overlap pipelined (" + std::to_string(sim.stages) + " stages)";
}

// The headline table of one exchange schedule: each policy's step time beside the paper's speedups.
std::string headline_table(const PlacementSimOptions& o, Overlap overlap, const std::vector<PolicySeries>& results,
                           const RoutingTrace& trace, double trace_balance, bool scored) {
  const double ds = find(results, "deepspeed").mean_step(), fm = find(results, "fastermoe").mean_step();
  const double fx = find(results, "flexmoe").mean_step(), ideal = find(results, "ideal").mean_step();
  std::ostringstream table;
  table << "### " << schedule_title(o.sim, overlap) << "\n\n"
        << "| policy | step ms | balance max/mean | vs ideal | flexmoe speedup |\n|---|---|---|---|---|\n"
        << std::fixed;
  for (const auto& s : results)
    table << "| " << s.policy << " | " << std::setprecision(3) << s.mean_step() * 1e3 << " | " << mean(s.balance)
          << " | " << s.mean_step() / ideal << " | " << std::setprecision(2) << s.mean_step() / fx << "x |\n";
  table << "\nflexmoe over deepspeed " << std::setprecision(2) << ds / fx << "x (paper: 1.70x avg), over fastermoe "
        << fm / fx << "x (paper: 1.30x avg); " << o.sim.gpus << " GPUs, " << trace.size()
        << " iterations, trace balance ratio " << trace_balance << " (static placement); flexmoe planner variant "
        << o.placement.flexmoe_variant << "; steps scored with "
        << (scored ? "the calibrated constants of " + o.sim.scoring
                   : std::string("the planners' own model (no sim.scoring)"))
        << "\n\n";
  return table.str();
}

void write_steps_csv(const std::string& path, const std::vector<PolicySeries> (&results)[2]) {
  CsvWriter steps(path, {"iteration", "overlap", "policy", "step_ms", "balance"});
  for (int k = 0; k < 2; ++k)
    for (const auto& s : results[k])
      for (std::size_t i = 0; i < s.step_seconds.size(); ++i)
        steps.row({std::to_string(i), overlap_name(kOverlaps[k]), s.policy, csv_number(s.step_seconds[i] * 1e3),
                   csv_number(s.balance[i])});
  steps.close();
}

// simulate() with a progress line (n of N iterations, rate, ETA) for long replays.
std::vector<PolicySeries> replay(const RoutingTrace& trace, SimSetup setup, const std::string& label) {
  Progress progress(label, 0, static_cast<std::int64_t>(trace.size()), "iterations");
  setup.progress = &progress;
  auto results = simulate(trace, setup);
  progress.finish();
  return results;
}

// The scaling rows (sim.scaling): a generated trace per GPU count, simulated under both exchange
// schedules, appended to `table` and the summary CSV; returns them for the summary line.
Json scaling_rows(const PlacementSimOptions& o, CsvWriter* summary, std::ostringstream& table) {
  Json scaling = Json::array();
  if (o.sim.scaling.empty()) return scaling;
  table << "| GPUs | overlap | trace balance | static ms | deepspeed ms | fastermoe ms | flexmoe ms | ideal ms | vs "
           "deepspeed | vs fastermoe | flexmoe/ideal |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto g : o.sim.scaling) {
    const auto t = generate_trace(generated_spec(o.sim, static_cast<int>(g), o.sim.scaling_iterations));
    const double tb = trace_balance_ratio(t, static_cast<int>(g));
    for (Overlap overlap : kOverlaps) {
      const auto r = replay(t, make_setup(o, static_cast<int>(g), overlap),
                            "placement_sim replay at " + std::to_string(g) + " GPUs, " + overlap_name(overlap));
      summary_rows(summary, static_cast<int>(g), overlap, tb, r);
      const double f = find(r, "flexmoe").mean_step();
      table << "| " << g << " | " << overlap_name(overlap) << " | " << std::setprecision(2) << tb
            << std::setprecision(3);
      for (const char* p : {"static", "deepspeed", "fastermoe", "flexmoe", "ideal"})
        table << " | " << find(r, p).mean_step() * 1e3;
      table << std::setprecision(2) << " | " << find(r, "deepspeed").mean_step() / f << "x | "
            << find(r, "fastermoe").mean_step() / f << "x | " << f / find(r, "ideal").mean_step() << " |\n";
      scaling.push_back({{"gpus", g},
                         {"overlap", overlap_name(overlap)},
                         {"flexmoe_vs_deepspeed", find(r, "deepspeed").mean_step() / f},
                         {"flexmoe_vs_fastermoe", find(r, "fastermoe").mean_step() / f}});
    }
  }
  return scaling;
}

// Flexmoe's plans of one exchange schedule's run in the summary line, their gains weighted by the
// iterations they were realised over (and net of their moves), and in the plan log.
Json plan_summary(const PlanStats& stats, Overlap overlap, JsonlWriter& log) {
  double predicted = 0, realised = 0, predicted_net = 0, realised_net = 0;
  for (const auto& p : stats.plans) {
    Json line = p.to_json();
    line["overlap"] = overlap_name(overlap);
    log.write(line);
    predicted += p.predicted_gain * static_cast<double>(p.realised_iterations);
    realised += p.realised_gain * static_cast<double>(p.realised_iterations);
    predicted_net += p.predicted_net();
    realised_net += p.realised_net();
  }
  return {{"plans", stats.plans.size()},
          {"replica_changes_per_100_iterations", stats.changes_per_100()},
          {"median_replica_lifetime", stats.median_lifetime()},
          {"replicas_never_removed", stats.alive_at_end},
          {"predicted_gain_ms", predicted * 1e3},
          {"realised_gain_ms", realised * 1e3},
          {"predicted_net_ms", predicted_net * 1e3},
          {"realised_net_ms", realised_net * 1e3}};
}

Json step_ms(const std::vector<PolicySeries>& results) {
  Json j;
  for (const auto& s : results) j[s.policy] = s.mean_step() * 1e3;
  return j;
}

}  // namespace

// The headline trace under both exchange schedules (the change log follows sim.overlap's run),
// then the scaling rows; the summary line's speedups are sim.overlap's.
int simulate_main(const PlacementSimOptions& o) {
  const int gpus = o.sim.gpus;
  const std::string& trace_path = o.sim.trace;
  RoutingTrace trace;
  FutureSampler futures;  // flexmoe's plans scored on other futures too (sim.plan_futures)
  if (trace_path.empty()) {
    const TraceSpec spec = generated_spec(o.sim, gpus, o.sim.iterations);
    trace = generate_trace(spec);
    if (o.sim.plan_futures > 0) futures = trace_futures(spec, o.sim.plan_futures);
  } else {
    SKEW_CHECK(o.sim.plan_futures == 0, "sim.plan_futures needs a generated trace: a recorded one ("
                                            << trace_path << ", sim.trace) has no other futures");
    trace = read_trace_jsonl(trace_path, o.sim.trace_key);
    check_trace_fits_ranks(trace, trace_path, gpus, "sim.gpus", o.sim.gpus_source);
  }
  const double trace_balance = trace_balance_ratio(trace, gpus);
  log::set_level(o.sim.verbose ? log::Level::Info : log::Level::Warn);
  JsonlWriter changes(o.output.changes);
  const Overlap headline = headline_overlap(o.sim);
  std::vector<PolicySeries> by_overlap[2];
  PlanStats plans[2];
  std::ostringstream table;  // the scaling rows continue it in fixed notation
  std::unique_ptr<CsvWriter> summary;
  if (!o.output.summary_csv.empty())
    summary = std::make_unique<CsvWriter>(
        o.output.summary_csv, std::vector<std::string>{"gpus", "overlap", "policy", "step_ms", "balance",
                                                       "trace_balance", "vs_ideal", "dropped_fraction", "changes"});
  for (int k = 0; k < 2; ++k) {
    SimSetup setup = make_setup(o, gpus, kOverlaps[k]);
    setup.plan_stats = &plans[k];
    setup.plan_futures = futures;
    if (kOverlaps[k] == headline) setup.change_log = &changes;
    by_overlap[k] = replay(trace, setup, std::string("placement_sim replay, ") + overlap_name(kOverlaps[k]));
    table << headline_table(o, kOverlaps[k], by_overlap[k], trace, trace_balance, setup.scoring.has_value())
          << std::fixed;
    summary_rows(summary.get(), gpus, kOverlaps[k], trace_balance, by_overlap[k]);
  }
  if (!o.output.steps_csv.empty()) write_steps_csv(o.output.steps_csv, by_overlap);
  const Json scaling = scaling_rows(o, summary.get(), table);
  if (summary) summary->close();
  changes.close();
  write_stdout(table.str(), "the results table");
  if (!o.output.table.empty()) write_file_atomic(o.output.table, table.str());
  const auto& results = by_overlap[headline == Overlap::None ? 0 : 1];
  const double ds = find(results, "deepspeed").mean_step(), fm = find(results, "fastermoe").mean_step();
  const double fx = find(results, "flexmoe").mean_step(), ideal = find(results, "ideal").mean_step();
  Json j;
  j["app"] = "placement_sim";
  j["gpus"] = gpus;
  j["iterations"] = trace.size();
  j["trace_balance"] = trace_balance;
  j["scoring"] = o.sim.scoring.empty() ? "planner model" : o.sim.scoring;
  j["overlap"] = overlap_name(headline);
  j["step_ms"] = step_ms(results);
  j["step_ms_none"] = step_ms(by_overlap[0]);
  j["step_ms_pipelined"] = step_ms(by_overlap[1]);
  j["flexmoe_vs_deepspeed"] = ds / fx;
  j["flexmoe_vs_fastermoe"] = fm / fx;
  j["flexmoe_vs_ideal"] = fx / ideal;
  j["flexmoe_changes"] = find(results, "flexmoe").changes;
  j["flexmoe_variant"] = o.placement.flexmoe_variant;
  JsonlWriter plan_log(o.output.plans);
  for (int k = 0; k < 2; ++k)
    j[std::string("flexmoe_plans_") + overlap_name(kOverlaps[k])] = plan_summary(plans[k], kOverlaps[k], plan_log);
  plan_log.close();
  j["flexmoe_plans"] = j[std::string("flexmoe_plans_") + overlap_name(headline)];
  j["scaling"] = scaling;
  print_summary(j);
  return 0;
}

// moe_train's expert: two matrices and two bias vectors.
ExpertShape measured_expert_shape(const SimSection& sim, const PlacementOptions& options) {
  const std::int64_t hidden = sim.hidden, ffn = sim.ffn_hidden;
  ExpertShape shape = options.shape;
  shape.params = 2 * hidden * ffn + hidden + ffn;
  shape.hidden_dim = static_cast<int>(hidden);
  return shape;
}

// Measured constants of this machine against a recorded moe_train run at world.size() ranks,
// term by term (see lib/placement/validate.hpp).
int validate_main(const PlacementSimOptions& o, comm::ProcessGroup& world) {
  const MeasuredRun run = read_measured_jsonl(o.sim.validate);
  const PlacementOptions options = placement_options(o.placement);
  const ExpertShape shape = measured_expert_shape(o.sim, options);
  const CostConstants constants = measure_constants(world, options.cost_overrides, shape);
  if (world.rank() != 0) return 0;
  const CostModel model(constants, shape);
  const Validation v = validate_cost_model(model, run, world.size(), options.flexmoe.live_shares);
  std::cout << std::fixed << std::setprecision(3) << "cost model vs " << o.sim.validate << " at " << world.size()
            << " ranks, " << v.iterations << " iterations (measured here: gemm " << constants.gemm_flops / 1e9
            << " GFLOP/s, all-to-all " << constants.alltoall_bandwidth / 1e9 << " GB/s + "
            << constants.alltoall_latency * 1e6 << " us a round)\n";
  Json j{{"app", "placement_sim"},
         {"validate", o.sim.validate},
         {"ranks", world.size()},
         {"iterations", v.iterations},
         {"gemm_flops", constants.gemm_flops},
         {"alltoall_bandwidth", constants.alltoall_bandwidth},
         {"alltoall_latency", constants.alltoall_latency}};
  for (const auto& [name, term, scale] :
       {std::tuple{"busiest_rows", v.rows, 1.0}, std::tuple{"compute_ms", v.compute, 1e3},
        std::tuple{"alltoall_bytes", v.alltoall_bytes, 1.0}, std::tuple{"sync_bytes", v.sync_bytes, 1.0},
        std::tuple{"modelled_step_ms", v.step, 1e3}, std::tuple{"alltoall_wall_ms", v.alltoall_wall, 1e3}}) {
    std::cout << "  " << std::setw(18) << std::left << name << " predicted " << term.predicted * scale << ", measured "
              << term.measured * scale << ", error " << term.error() * 100 << "%\n";
    j[name] = {{"predicted", term.predicted * scale}, {"measured", term.measured * scale}, {"error", term.error()}};
  }
  if (!o.output.validation.empty()) write_file_atomic(o.output.validation, j.dump() + "\n");
  print_summary(j);
  return 0;
}

// Fits the constants to the sim.calibrate runs and checks them on the sim.calibrate_check runs.
int calibrate_main(const PlacementSimOptions& o) {
  const PlacementOptions options = placement_options(o.placement);
  const ExpertShape shape = measured_expert_shape(o.sim, options);
  std::vector<MeasuredRun> fit_runs;
  for (const std::string& path : o.sim.calibrate) fit_runs.push_back(read_measured_jsonl(path));
  const CalibrationFit fit = fit_constants(fit_runs, shape, cluster_constants(options));
  const CostModel model(fit.constants, shape);
  std::cout << std::setprecision(4) << "fitted to " << fit_runs.size() << " runs (" << fit.compute_samples
            << " compute records, " << fit.alltoall_samples << " all-to-all iterations): gemm "
            << fit.constants.gemm_flops / 1e9 << " GFLOP/s, all-to-all " << fit.constants.alltoall_bandwidth / 1e9
            << " GB/s + " << fit.constants.alltoall_latency * 1e6 << " us a round\n";
  Json checks = Json::array();
  for (const std::string& path : o.sim.calibrate_check) {
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
  if (!o.output.calibration.empty()) write_file_atomic(o.output.calibration, constants.dump(1) + "\n");
  print_summary(Json{{"app", "placement_sim"}, {"calibration", constants}, {"held_out", checks}});
  return 0;
}

namespace {
// Every output file is tried before the simulation runs (minutes at 1024 GPUs), so a bad path
// fails at once, naming its key (issue 38).
void check_outputs(const PlacementSimOptions& o) {
  for (const auto& [key, path] : {std::pair{"output.validation", &o.output.validation},
                                  {"output.calibration", &o.output.calibration},
                                  {"output.changes", &o.output.changes},
                                  {"output.steps_csv", &o.output.steps_csv},
                                  {"output.summary_csv", &o.output.summary_csv},
                                  {"output.table", &o.output.table}})
    require_writable_file(key, *path);
}
}  // namespace

int main(int argc, char** argv) {
  return comm::run_main(argc, argv, false, [&](comm::Runtime& rt) {
    const Schema schema = placement_sim_schema();
    const Config cfg = Config::parse(schema, argc, argv);
    if (cfg.answer_help_or_print(std::cout, rt.world_rank == 0)) return 0;
    const PlacementSimOptions options = placement_sim_options(cfg);
    if (rt.world_rank == 0) check_outputs(options);
    if (!options.sim.validate.empty()) return validate_main(options, *rt.world);
    if (!options.sim.calibrate.empty()) return rt.world_rank == 0 ? calibrate_main(options) : 0;
    return rt.world_rank == 0 ? simulate_main(options) : 0;
  });
}
