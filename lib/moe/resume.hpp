// moe_train's output.resume. The newest complete checkpoint step whose files all verify
// (index readable, every shard a rank needs passing its checksums and holding finite values) is
// loaded; the ranks agree on each candidate step by an allreduce before any of them loads, and a
// step that fails on some rank is skipped with a warning naming the file and the reason, then
// un-marked so that no later resume picks it. When no complete step verifies, the run stops.
//
// At the world size that wrote the step, each rank loads its own shard (bit-exact resume). At
// another world size (moe.num_experts a multiple of the new size; the session checks that), each
// rank reads rank 0's shard for the dense state and, through the step's index, the shards
// holding the experts its block placement gives it, with their AdamW moments. moe.policy=flexmoe
// is refused there: its replicas, placement and load history belong to the old world size.
#pragma once
#include <cstdint>
#include <string>

#include "lib/moe/session.hpp"

namespace skew::moe {

// Loads the checkpoint into `s` when its output.resume is set; returns the iteration to start
// from (0: nothing to resume). Collective.
std::int64_t restore(Session& s);

}  // namespace skew::moe
