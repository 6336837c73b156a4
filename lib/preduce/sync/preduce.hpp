// Partial reduce's rule for overlapped groups (preduce.cpp holds the mode itself).
#pragma once
#include <cstdint>

#include "lib/preduce/options.hpp"

namespace skew::preduce {

// preduce.refresh_staleness: after the group of a local step in which this worker's staleness
// s = max_version - ready_version + 1 reached the threshold, its communication thread reports
// ready again at once (with the model as it is now) up to s - 1 times before its next local
// step: it missed s - 1 of the freshest member's steps, each of which that member followed with
// a synchronisation, so a straggler is averaged about as often per second as the fast workers
// while it is still computing. A fresh worker (s below the threshold) gets 0: it waits for its
// next step as before; so does every worker without preduce.overlap. Returns the number of
// such refreshes.
std::int64_t refresh_budget(const TrainOptions& opt, std::int64_t max_version, std::int64_t ready_version);

}  // namespace skew::preduce
