// moe_train's configuration: its schema (every key, default and help text) and the one step that
// turns a parsed config into lib/moe's options (lib/moe/options.hpp), one field per key.
#pragma once
#include "core/config.hpp"
#include "lib/moe/options.hpp"

namespace skew {

Schema moe_train_schema();

// The values of a config parsed with moe_train_schema().
moe::MoeTrainOptions moe_train_options(const Config& config);

}  // namespace skew
