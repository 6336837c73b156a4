// The partial-reduce primitive over MPI. A controller (a thread on world rank 0, or world
// rank 0 as a dedicated rank that trains nothing) runs a GroupFormer: workers send it
// "ready (worker, version)" after each local step and block until it answers with their group
// (members, max version, staleness weights). Members then reduce inside the group through
// ProcessGroup::subgroup, which is cached per member set, so after warm-up no round creates a
// communicator. A worker that has run all its steps sends "finished"; the controller closes
// groups of whoever remains and exits once every worker has finished, so workers that stop at
// different steps never hang.
#pragma once
#include <mpi.h>

#include <memory>
#include <thread>
#include <vector>

#include "mpi/preduce_groups.hpp"
#include "mpi/process_group.hpp"

namespace skew::comm {

class PartialReduce {
 public:
  // Collective over `world` (an MPI-backed group over MPI_COMM_WORLD). With a dedicated
  // controller, world rank 0 runs only the controller and the workers are world ranks 1..N-1.
  // options.num_workers is set here from the world size.
  // `initial` (on the controller's rank; empty elsewhere) continues a checkpointed controller.
  PartialReduce(std::shared_ptr<ProcessGroup> world, GroupOptions options, bool dedicated_controller,
                FormerState initial = {});
  ~PartialReduce();
  PartialReduce(const PartialReduce&) = delete;
  PartialReduce& operator=(const PartialReduce&) = delete;

  bool is_worker() const { return workers_ != nullptr; }
  // The group of all workers (rank = worker id); nullptr on a dedicated controller rank.
  const std::shared_ptr<ProcessGroup>& workers() const { return workers_; }
  int num_workers() const { return options_.num_workers; }

  // Dedicated controller rank: serves until every worker has finished.
  void serve();
  // World rank 0 once every worker has finished (after serve(), or after finish() with the
  // controller thread, which this joins): the controller's final state, for a checkpoint.
  FormerState controller_state();

  // Worker side: report ready and wait for the group this worker is put in.
  Group ready(std::int64_t version);
  // Worker side: no more ready messages from this worker.
  void finish();
  // How long this worker's ready waited in the controller's queue for `group` to close; the
  // rest of its wait in ready() is controller and message latency.
  double queued_seconds(const Group& group) const;
  // The cached process group of `group`'s members (this worker must be one of them).
  std::shared_ptr<ProcessGroup> group_comm(const Group& group);
  // Weighted model average with the options' member rule (apply_member_update), S = sum_j w_j x_j
  // all-reduced in the group. `scratch` is resized to x's length.
  void average_model(std::vector<float>& x, const Group& group, std::vector<float>& scratch);
  // Weighted gradient average: g <- sum_j w_j g_j over the group.
  void average_gradient(std::vector<float>& g, const Group& group);

 private:
  void controller_loop();
  double now() const { return MPI_Wtime() - start_; }
  int world_rank_of_worker(int worker) const { return worker + worker_offset_; }

  std::shared_ptr<ProcessGroup> world_, workers_;
  GroupOptions options_;
  FormerState state_;                 // the initial state, then (once the controller is done) its final one
  MPI_Comm control_ = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD reserved for control messages
  int worker_offset_ = 0, world_rank_ = 0;
  double start_ = 0.0;
  std::thread controller_;
  bool finished_ = false;
};

}  // namespace skew::comm
