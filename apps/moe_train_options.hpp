// moe_train's configuration: its schema (every key, default and help text) and the one step that
// turns a parsed config into lib/moe's options (lib/moe/options.hpp), one field per key.
#pragma once
#include "core/config.hpp"
#include "lib/moe/options.hpp"

namespace skew {

Schema moe_train_schema();

// The values of a config parsed with moe_train_schema(); output paths starting with {run} are
// files in `run_dir` (apps/run_dir.hpp), none when it is empty.
moe::MoeTrainOptions moe_train_options(const Config& config, const std::string& run_dir = "");

}  // namespace skew
