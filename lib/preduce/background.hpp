// Synchronisation on a communication thread beside the computing thread, for the two modes that
// never make the computing thread wait for peers:
//   adpsgd                      - AD-PSGD's asynchronous pairwise averaging (comm::PairwiseGossip);
//   preduce with overlap = true - partial reduce whose group averaging overlaps the next local
//     steps: after a step the communication thread reports ready with a snapshot of the model,
//     averages the snapshot in its group (same controller, staleness weights and member rule),
//     and adds the change (result - snapshot) to the model, so the steps taken meanwhile are kept;
//     with preduce.refresh_staleness a stale worker rejoins at once (refresh_budget).
// The computing thread computes each gradient at a snapshot taken under lock(), applies it under
// lock(), and calls request(); requests made while a synchronisation is in flight are coalesced.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>

#include "lib/preduce/worker.hpp"
#include "mpi/preduce_controller.hpp"
#include "mpi/process_group.hpp"

namespace skew::preduce {

class BackgroundSync {
 public:
  struct Stats {
    std::int64_t syncs = 0;      // averagings this worker took part in
    std::int64_t refreshes = 0;  // of which joined without a new local step (refresh_budget)
    std::int64_t members = 0;    // sum of their group sizes
    double wait_s = 0.0;         // communication thread: waiting for a group (preduce)
    double controller_s = 0.0;   // of which controller and message latency
    double comm_s = 0.0;         // communication thread: exchanging models
  };
  virtual ~BackgroundSync() = default;
  // Guards the worker's model and version against the communication thread.
  virtual std::unique_lock<std::mutex> lock() = 0;
  // After a local step: ask for one synchronisation.
  virtual void request() = 0;
  // When training ends: finishes the synchronisation in flight (pending requests are dropped)
  // and joins the thread. Stats are final after this.
  virtual void stop() = 0;
  virtual Stats stats() const = 0;
};

// AD-PSGD over the MPI-backed `workers` group.
std::unique_ptr<BackgroundSync> make_gossip(const std::shared_ptr<comm::ProcessGroup>& workers, Worker& me,
                                            std::uint64_t seed);
// Overlapped partial reduce through `pr` (which must outlive the result), by `opt`'s rules.
std::unique_ptr<BackgroundSync> make_overlapped_reduce(comm::PartialReduce& pr, Worker& me, const TrainOptions& opt);

}  // namespace skew::preduce
