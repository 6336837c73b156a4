// Synchronisation on a communication thread beside the computing thread, for the two modes that
// never make the computing thread wait for peers:
//   adpsgd                      - AD-PSGD's asynchronous pairwise averaging (comm::PairwiseGossip);
//   preduce with overlap = true - partial reduce whose group averaging overlaps the next local
//     steps: after a step the communication thread reports ready with a snapshot of the model,
//     averages the snapshot in its group (same controller, staleness weights and member rule),
//     and adds the change (result - snapshot) to the model, so the steps taken meanwhile are kept;
//     with preduce.refresh_staleness a stale worker rejoins at once (refresh_budget).
// The computing thread computes each gradient at a snapshot of the model, applies it to the model
// as it is then, and asks for a synchronisation; requests made while one is in flight are coalesced.
#pragma once
#include <cstdint>
#include <memory>

#include "lib/preduce/sync/sync_mode.hpp"

namespace skew::preduce {

// AD-PSGD over the MPI-backed workers group of `context`, partners drawn from `seed`.
std::unique_ptr<StepSync> gossip_step(const SegmentContext& context, std::uint64_t seed);
// Overlapped partial reduce through the segment's controller client (context.pr), by `opt`'s rules.
std::unique_ptr<StepSync> overlapped_reduce_step(const SegmentContext& context, const TrainOptions& opt);

}  // namespace skew::preduce
