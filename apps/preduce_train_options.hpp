// preduce_train's configuration: the schema (every key with its default, type and help) and the
// one step that turns a parsed Config into lib/preduce's typed options. The only place that
// knows the keys: a key is its struct field's section and name (sync.mode -> TrainOptions::mode,
// sim.workers -> sim_workers); rules that span keys are checked here, naming them.
#pragma once
#include "core/config.hpp"
#include "lib/preduce/options.hpp"

namespace skew::preduce {

Schema make_schema();
// Output paths starting with {run} are files in `run_dir` (apps/run_dir.hpp), none when it is empty.
TrainOptions read_options(const Config& config, const std::string& run_dir = "");

}  // namespace skew::preduce
