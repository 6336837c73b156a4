// wide_train's keys: the schema (every key, its default, range and help; --help prints it) and
// the one step from the parsed configuration to lib/wide's option structs (lib/wide/options.hpp),
// whose fields are named as the keys. No other file reads wide_train's keys.
#pragma once
#include "core/config.hpp"
#include "lib/wide/options.hpp"

namespace skew::wide {

Schema wide_train_schema();
// output.dir's value is `run_dir`, the directory apps/run_dir.hpp resolved ("": none, as in
// --predict and --export); other output paths starting with {run} are files in it.
WideOptions wide_train_options(const Config& config, const std::string& run_dir = "");

}  // namespace skew::wide
