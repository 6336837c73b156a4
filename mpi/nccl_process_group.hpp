// NCCL backend on device buffers (built only with CUDA). Bootstraps over an MPI communicator:
// rank 0 makes the unique id and broadcasts it. A split is collective over the group, so its
// communicator comes from ncclCommSplit (NCCL >= 2.18: shares the parent's resources; before,
// a new one over the MPI split); a subgroup is made by its members only, so its communicator is a
// new one over the cached MPI subgroup, once per rank set. Operations are enqueued on the group's
// stream after everything the caller's stream (the legacy default stream, where skew's kernels
// run) has enqueued before the call; blocking calls wait for them, non-blocking ones return a
// Work that waits on an event. Every wait also polls the communicator's asynchronous error, so a
// failed peer aborts the communicator and throws instead of hanging.
#pragma once
#include <mpi.h>

#include <memory>

#include "mpi/process_group.hpp"

namespace skew::comm {

#ifdef SKEW_WITH_CUDA
// Collective over `comm`; takes ownership of `comm` unless it is MPI_COMM_WORLD.
std::shared_ptr<ProcessGroup> make_nccl_group(MPI_Comm comm);
#endif

}  // namespace skew::comm
