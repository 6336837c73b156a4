// moe_train's configuration: its schema, every key with its default and help text.
#pragma once
#include "lib/core/config.hpp"

namespace skew::moe {

Schema moe_train_schema();

}  // namespace skew::moe
