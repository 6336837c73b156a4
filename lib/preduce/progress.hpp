// What an MPI worker's run gathers besides its model, carried from segment to segment and across
// checkpoints (checkpoint.hpp) so a resumed run reports the same summary and curve as a straight one.
#pragma once
#include <cstdint>
#include <vector>

namespace skew::preduce {

// A communication thread's synchronisations (adpsgd, overlapped preduce; background.hpp).
struct SyncStats {
  std::int64_t syncs = 0;      // averagings this worker took part in
  std::int64_t refreshes = 0;  // of which joined without a new local step (refresh_budget)
  std::int64_t members = 0;    // sum of their group sizes
  double wait_s = 0.0;         // communication thread: waiting for a group (preduce)
  double controller_s = 0.0;   // of which controller and message latency
  double comm_s = 0.0;         // communication thread: exchanging models
  void add(const SyncStats& s) {
    syncs += s.syncs;
    refreshes += s.refreshes;
    members += s.members;
    wait_s += s.wait_s;
    controller_s += s.controller_s;
    comm_s += s.comm_s;
  }
};

struct WorkerProgress {
  std::int64_t groups_joined = 0, members_seen = 0;
  bool stopped = false;  // reached train.max_seconds
  double sum_compute = 0.0, sum_injected = 0.0, sum_wait = 0.0, sum_comm = 0.0, sum_controller = 0.0;
  double elapsed_s = 0.0;  // training time before the current segment
  double next_eval = 0.0;  // next point of the evaluation grid
  std::vector<double> series;
  SyncStats synced;  // summed over segments
};

}  // namespace skew::preduce
