#include "apps/placement_sim_options.hpp"

#include "apps/placement_options.hpp"
#include "core/error.hpp"

namespace skew {

Schema placement_sim_schema() {
  Schema s("placement_sim", "Trace-driven simulation of MoE expert placement policies on a modelled cluster");
  add_placement_keys(s);
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
      .add_int("sim.plan_futures", 0, {0, 100000},
               "generated traces: score each flexmoe plan also on this many other futures of the trace (the "
               "same past, other drift and sampling noise), and log which share of them any one prediction "
               "could have had within 25% (best_within in output.plans); 0 = off")
      .add_string("sim.trace", "", "routing trace JSONL to replay instead of generating (moe_train metrics)")
      .add_string("sim.trace_key", "tokens_per_expert", "JSONL key holding [layer][expert] counts")
      .add_float("sim.capacity_factor", 0.0, FloatRange::at_least(0),
                 "deepspeed capacity factor; 0 = drop_tokens=false, padding to the max count; with a factor, "
                 "each expert takes gpus x max(ceil(assignments / gpus / experts * factor), sim.min_capacity) "
                 "rows, moe_train's per-rank capacity")
      .add_int("sim.min_capacity", 4, {0, kMaxInt32},
               "deepspeed: least slots per expert and rank (as moe.min_capacity)")
      .add_choice("sim.overlap", "pipelined", {"none", "pipelined"},
                  "the headline's exchange schedule, the same for every policy and the ideal: none (all-to-all "
                  "after expert compute) or pipelined (overlapped in sim.stages stages, each paying "
                  "placement.stage_latency); every table reports both")
      .add_int("sim.stages", 4, {1, 1024}, "pipeline stages of the pipelined schedule (1 = no overlap)")
      .add_int_list("sim.scaling", "", {1, 1 << 16},
                    "comma-separated GPU counts for scaling rows (generated traces), e.g. 8,64,1024")
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
      .add_string("output.plans", "",
                  "flexmoe's plans under both exchange schedules (JSONL: overlap, iteration, replicas added and "
                  "removed, move seconds as paid and as predicted, gain per iteration predicted and realised over "
                  "the iterations until the next plan, and both net of the moves over those iterations)")
      .add_string("output.steps_csv", "", "per-iteration step time and balance ratio per policy (CSV)")
      .add_string("output.summary_csv", "", "mean step time per policy, headline size and scaling rows (CSV)")
      .add_string("output.table", "", "markdown table of the results beside the paper's headline");
  return s;
}

namespace {

SimSection sim_section(const Config& c) {
  SimSection s;
  s.gpus = c.get_int_as<int>("sim.gpus");
  s.gpus_source = c.source("sim.gpus");
  s.experts_per_gpu = c.get_int_as<int>("sim.experts_per_gpu");
  s.layers = c.get_int_as<int>("sim.layers");
  s.iterations = c.get_int_as<int>("sim.iterations");
  s.tokens_per_gpu = c.get_int("sim.tokens_per_gpu");
  s.top_k = c.get_int("sim.top_k");
  s.hidden = c.get_int("sim.hidden");
  s.ffn_hidden = c.get_int("sim.ffn_hidden");
  s.zipf = c.get_float("sim.zipf");
  s.drift = c.get_float("sim.drift");
  s.noise = c.get_float("sim.noise");
  s.seed = c.get_int_as<std::uint64_t>("sim.seed");
  s.plan_futures = c.get_int_as<int>("sim.plan_futures");
  s.trace = c.get_string("sim.trace");
  s.trace_key = c.get_string("sim.trace_key");
  s.capacity_factor = c.get_float("sim.capacity_factor");
  s.min_capacity = c.get_int("sim.min_capacity");
  s.overlap = c.get_string("sim.overlap");
  s.stages = c.get_int_as<int>("sim.stages");
  s.scaling = c.get_int_list("sim.scaling");
  s.scaling_iterations = c.get_int_as<int>("sim.scaling_iterations");
  s.validate = c.get_string("sim.validate");
  s.calibrate = c.get_string_list("sim.calibrate");
  s.calibrate_check = c.get_string_list("sim.calibrate_check");
  s.scoring = c.get_string("sim.scoring");
  s.verbose = c.get_bool("sim.verbose");
  return s;
}

SimOutputOptions output_options(const Config& c) {
  return {.validation = c.get_string("output.validation"),
          .calibration = c.get_string("output.calibration"),
          .changes = c.get_string("output.changes"),
          .plans = c.get_string("output.plans"),
          .steps_csv = c.get_string("output.steps_csv"),
          .summary_csv = c.get_string("output.summary_csv"),
          .table = c.get_string("output.table")};
}

}  // namespace

PlacementSimOptions placement_sim_options(const Config& c) {
  return {.placement = placement_settings(c), .sim = sim_section(c), .output = output_options(c)};
}

}  // namespace skew
