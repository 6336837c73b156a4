// placement_sim's configuration: its schema (the [placement] keys, sim.* and output.*) and the
// one step that turns a parsed config into the options below, one field per key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "lib/placement/options.hpp"

namespace skew {

struct SimSection {
  int gpus = 0, experts_per_gpu = 0, layers = 0, iterations = 0;
  std::int64_t tokens_per_gpu = 0, top_k = 0, hidden = 0, ffn_hidden = 0;
  double zipf = 0, drift = 0, noise = 0;
  std::uint64_t seed = 0;
  int plan_futures = 0;  // other futures each flexmoe plan is scored on (generated traces only)
  std::string trace, trace_key;
  double capacity_factor = 0;
  std::int64_t min_capacity = 0;
  std::string overlap;  // the headline's schedule: none or pipelined
  int stages = 0;
  std::vector<std::int64_t> scaling;  // GPU counts of the scaling rows
  int scaling_iterations = 0;
  std::string validate;
  std::vector<std::string> calibrate, calibrate_check;
  std::string scoring;
  bool verbose = false;
  std::string gpus_source;  // where sim.gpus was set (file:line or the command line), for errors
};

struct SimOutputOptions {
  std::string validation, calibration, changes, plans, steps_csv, summary_csv, table;
};

struct PlacementSimOptions {
  placement::PlacementSettings placement;
  SimSection sim;
  SimOutputOptions output;
};

Schema placement_sim_schema();

// The values of a config parsed with placement_sim_schema(). Throws naming sim.scaling's source
// when a simulation (neither sim.validate nor sim.calibrate) lists a GPU count out of range.
PlacementSimOptions placement_sim_options(const Config& config);

}  // namespace skew
