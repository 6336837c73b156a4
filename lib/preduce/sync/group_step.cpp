#include "lib/preduce/sync/group_step.hpp"

#include <algorithm>

#include "core/timer.hpp"
#include "lib/preduce/progress.hpp"

namespace skew::preduce {

void GroupStep::synchronise(Worker& me, StepRecord& step) {
  Timer t;
  const comm::Group g = pr_.ready(me.version());
  step.wait = t.seconds();
  step.controller = std::max(0.0, step.wait - pr_.queued_seconds(g));
  t.reset();
  sleep_seconds(me.hetero().link_s());  // a slow link holds back its group
  reduce(me, g);
  step.comm = t.seconds();
  step.members = g.members;
  ++progress_.groups_joined;
  progress_.members_seen += static_cast<std::int64_t>(g.members.size());
}

}  // namespace skew::preduce
