// The one resume walk of every app (moe_train, wide_train, preduce_train): the complete steps of
// a CheckpointDir are tried newest first; a step whose files fail to read or verify on some rank
// (a flipped byte, a truncated shard, an unreadable marker or index) is skipped with a warning
// naming the file and the reason, and the next older one is tried. The ranks agree on each
// candidate (through `agree`, a collective) before any of them loads, so all load the same step.
// The newer steps skipped lose their marker: the resumed run rewrites them, and a crash while it
// does must not leave a marked step mixing old and new shards.
#pragma once
#include <cstdint>
#include <functional>

#include "core/checkpoint.hpp"

namespace skew {

struct ResumeSteps {
  // Reads and verifies this rank's files of `step`, keeping what `load` needs; throws skew::Error
  // on a damaged or unreadable file (the step is then skipped).
  std::function<void(std::int64_t step)> read;
  // Every rank's `ok`, and-ed (a collective over the ranks sharing the directory); a single
  // process passes its own.
  std::function<bool(bool ok)> agree;
  // Loads the step every rank read. A refusal here (another model, world size or setting) ends
  // the run: the files are intact, the configuration does not match them.
  std::function<void(std::int64_t step)> load;
};

// Loads the newest complete step that verifies on every rank and returns it; -1 when `dir` holds
// no complete step. Throws, listing each step's reason, when complete steps exist and none
// verifies. Collective when `how.agree` is.
std::int64_t resume_newest_intact(const CheckpointDir& dir, const ResumeSteps& how);

// The agree of a single process.
bool this_process_only(bool ok);

}  // namespace skew
