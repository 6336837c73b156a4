// Process start-up shared by every executable: MPI_Init_thread (MPI_THREAD_MULTIPLE, which
// the partial-reduce controller thread needs), local rank via MPI_Comm_split_type (works under
// mpirun and srun alike), GPU binding local_rank % device_count, and the failure rule: where
// every rank throws the same message, rank 0 prints it once ("error: ...") and the job ends
// with status 1; a rank that throws alone prints "rank R: error: ..." and calls MPI_Abort so
// the job ends instead of hanging.
#pragma once
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "mpi/process_group.hpp"

namespace skew::comm {

// Mpi: host buffers (device buffers staged through pinned host memory); Nccl: device buffers;
// Hybrid: host buffers to MPI, device buffers to NCCL (a GPU run's world group).
enum class Backend { Mpi, Nccl, Hybrid };

struct Runtime {
  int world_rank = 0, world_size = 1;
  int local_rank = 0, local_size = 1;
  int cuda_device = -1;                 // bound device, or -1 on the CPU path
  std::shared_ptr<ProcessGroup> world;  // MPI backend over MPI_COMM_WORLD
};

// Creates the world group for `backend` (NCCL and Hybrid need a bound GPU; throws saying so otherwise).
std::shared_ptr<ProcessGroup> make_world_group(const Runtime& rt, Backend backend);

// Runs `body` between MPI_Init and MPI_Finalize; returns its exit code. An exception ends the
// process with status 1 after one line on stderr: "error: ..." from rank 0 where every rank
// failed alike within half a second, else "rank R: error: ..." from each failing rank, a rank
// failing alone then aborting the job (MPI_Abort).
// `bind_gpu`: bind local_rank % device_count when a GPU is visible.
int run_main(int argc, char** argv, bool bind_gpu, const std::function<int(Runtime&)>& body);

// Binds this rank to GPU local_rank % device_count (sets rt.cuda_device); for a program that
// decides after reading its config (moe_train's train.device), before it allocates on the GPU.
// Throws when no GPU is visible.
void bind_local_gpu(Runtime& rt);

// Collective over the world: true when no two ranks of a node are bound to the same GPU, on
// every node (compared by UUID, which per-rank CUDA_VISIBLE_DEVICES numbering does not hide).
// NCCL refuses ranks sharing a GPU, so a caller picks Backend::Hybrid or Nccl only then. Every
// rank must have bound one (bind_local_gpu); throws otherwise.
bool every_rank_has_own_gpu(const Runtime& rt);

// The line a failed run prints for `e`: its message, and with SKEW_DEBUG=1 in the environment
// also where the source raised it (skew::Error::where()).
std::string error_line(const std::exception& e);
// Prints "rank R: error: `message`" and ends the whole job at once (MPI_Abort where more than
// one rank runs): for a failure on one rank or thread that the other ranks will not share.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

}  // namespace skew::comm
