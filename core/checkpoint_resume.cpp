#include "core/checkpoint_resume.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace skew {

std::int64_t resume_newest_intact(const CheckpointDir& dir, const ResumeSteps& how) {
  const std::vector<std::int64_t> steps = dir.complete_steps();
  std::string skipped;  // "step N: reason; " for the error when no step verifies
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::int64_t step = *it;
    std::string reason;
    try {
      how.read(step);
    } catch (const Error& e) {
      reason = e.what();
    }
    if (how.agree(reason.empty())) {
      how.load(step);
      if (dir.rank() == 0)
        for (auto newer = steps.rbegin(); newer != it; ++newer) dir.unmark(*newer);
      return step;
    }
    if (!reason.empty()) SKEW_WARN("skipping checkpoint step " << step << ": " << reason);
    SKEW_INFO("checkpoint step " << step << " does not verify on every rank (see the warnings); trying an older one");
    skipped += "step " + std::to_string(step) + (reason.empty() ? ": failed on another rank; " : ": " + reason + "; ");
  }
  SKEW_CHECK(steps.empty(),
             "output.resume: no complete checkpoint step in " << dir.dir() << " verifies on every rank: " << skipped);
  return -1;
}

bool this_process_only(bool ok) {
  return ok;
}

}  // namespace skew
