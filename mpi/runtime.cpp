#include "mpi/runtime.hpp"

#include <malloc.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "mpi/hybrid_process_group.hpp"
#include "mpi/launch_check.hpp"
#include "mpi/mpi_check.hpp"
#include "mpi/mpi_process_group.hpp"
#include "mpi/nccl_process_group.hpp"

#ifdef SKEW_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace skew::comm {

std::string error_line(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  const char* debug = std::getenv("SKEW_DEBUG");
  if (error == nullptr || error->where().empty() || debug == nullptr || std::string(debug) != "1") return e.what();
  return std::string(e.what()) + " [" + error->where() + "]";
}

void abort_job(const std::string& message, int code) {
  int rank = 0, initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::fprintf(stderr, "rank %d: error: %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (initialized && !finalized && size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  if (initialized && !finalized) MPI_Finalize();
  std::exit(code);
}

namespace {

// A copy of MPI_COMM_WORLD on which failing ranks compare their messages, apart from any
// collective the ranks still running may be waiting in.
MPI_Comm failure_comm = MPI_COMM_NULL;

// How long a failing rank waits for the others to fail too: ranks that read the same config
// fail within milliseconds of each other; a rank failing alone aborts the job after this.
constexpr auto kAgreementWait = std::chrono::milliseconds(500);

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

enum class Failure { Alone, AllAlike, AllDiffer };

// Whether every rank failed, and with the same message, by the time kAgreementWait has passed.
Failure compare_failures(const std::string& message) {
  const std::uint64_t hash = fnv1a(message);
  // MIN of ~hash gives ~MAX of hash. Static: a comparison left pending when this rank aborts
  // still has its buffers.
  static std::array<std::uint64_t, 2> mine, lowest;
  mine = {hash, ~hash};
  MPI_Request request;
  if (MPI_Iallreduce(mine.data(), lowest.data(), 2, MPI_UINT64_T, MPI_MIN, failure_comm, &request) != MPI_SUCCESS)
    return Failure::Alone;
  const auto deadline = std::chrono::steady_clock::now() + kAgreementWait;
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!done) return Failure::Alone;
  return lowest[0] == ~lowest[1] ? Failure::AllAlike : Failure::AllDiffer;
}

// A failure in run_main's body: one line for the user. Where every rank failed with the same
// message (a config error each rank finds), rank 0 alone prints it and every rank ends with
// MPI_Finalize and `code`, so Open MPI prints no abort banner; otherwise each failing rank prints
// its line with its rank, and a rank failing alone aborts the job so the others do not hang.
[[noreturn]] void end_failed_run(const std::string& message, int code) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Failure failure = size == 1 ? Failure::AllAlike : compare_failures(message);
  if (failure == Failure::Alone) abort_job(message, code);
  if (failure == Failure::AllDiffer)
    std::fprintf(stderr, "rank %d: error: %s\n", rank, message.c_str());
  else if (rank == 0)
    std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  alarm(10);  // an operation the failure left pending could hold MPI_Finalize: end then by SIGALRM
  MPI_Comm_free(&failure_comm);
  MPI_Finalize();
  std::exit(code);
}

}  // namespace

std::shared_ptr<ProcessGroup> make_world_group(const Runtime& rt, Backend backend) {
  if (backend == Backend::Mpi) return rt.world;
  SKEW_CHECK(rt.cuda_device >= 0, "the " << (backend == Backend::Nccl ? "NCCL" : "hybrid MPI+NCCL")
                                         << " backend needs a GPU on every rank; rank " << rt.world_rank << " has none"
                                         << (cuda_built() ? "" : " (this build has no CUDA support)"));
#ifdef SKEW_WITH_CUDA
  return backend == Backend::Nccl ? make_nccl_group(MPI_COMM_WORLD) : make_hybrid_group(MPI_COMM_WORLD);
#else
  SKEW_THROW("the NCCL backend is not in this build (configure with -DSKEW_CUDA=ON)");
#endif
}

void bind_local_gpu(Runtime& rt) {
  const int devices = cuda_device_count();
  SKEW_CHECK(devices > 0, "rank " << rt.world_rank << ": no CUDA device is visible to bind");
  rt.cuda_device = rt.local_rank % devices;
#ifdef SKEW_WITH_CUDA
  if (cudaSetDevice(rt.cuda_device) != cudaSuccess) SKEW_THROW("cudaSetDevice(" << rt.cuda_device << ") failed");
#endif
}

bool every_rank_has_own_gpu(const Runtime& rt) {
  SKEW_CHECK(rt.cuda_device >= 0, "rank " << rt.world_rank << " has no GPU bound (bind_local_gpu first)");
  std::array<char, 16> mine{};
#ifdef SKEW_WITH_CUDA
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, rt.cuda_device) != cudaSuccess)
    SKEW_THROW("rank " << rt.world_rank << ": cudaGetDeviceProperties(" << rt.cuda_device << ") failed");
  std::memcpy(mine.data(), prop.uuid.bytes, mine.size());
#endif
  MPI_Comm node;
  SKEW_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt.world_rank, MPI_INFO_NULL, &node));
  std::vector<char> all(mine.size() * static_cast<std::size_t>(rt.local_size));
  const int width = static_cast<int>(mine.size());
  SKEW_MPI_CHECK(MPI_Allgather(mine.data(), width, MPI_CHAR, all.data(), width, MPI_CHAR, node));
  MPI_Comm_free(&node);
  int own = 1, everywhere = 0;
  for (int r = 0; r < rt.local_size; ++r)
    if (r != rt.local_rank &&
        std::memcmp(all.data() + static_cast<std::size_t>(r) * mine.size(), mine.data(), mine.size()) == 0)
      own = 0;
  SKEW_MPI_CHECK(MPI_Allreduce(&own, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return everywhere == 1;
}

int run_main(int argc, char** argv, bool bind_gpu, const std::function<int(Runtime&)>& body) {
  // Training steps free and reallocate the same large buffers every step; by default glibc maps
  // blocks above 128 KiB afresh and returns freed heap tops to the kernel, so every step paid page
  // faults on them (a fifth of a CPU moe_train step). Keep them in the heap and in the process.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Said before MPI_Init, which is where Open MPI aborts without PMI (and without naming the fix).
  const int no_pmi_tasks = srun_tasks_without_pmi();
  if (no_pmi_tasks > 0 && first_srun_task()) {
    std::fprintf(stderr, "srun task 0: error: %s\n", srun_pmi_message(no_pmi_tasks).c_str());
    std::fflush(stderr);
  }
  prefer_quick_singleton_start();
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "error: MPI_Init_thread failed\n");
    return 1;
  }
  // An MPI that started anyway runs every task as its own 1-rank job: stop instead.
  int init_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &init_size);
  if (const int tasks = srun_tasks_as_singleton(init_size); tasks > 0) {
    if (first_srun_task() && no_pmi_tasks == 0)
      std::fprintf(stderr, "srun task 0: error: %s\n", srun_pmi_message(tasks).c_str());
    else if (first_srun_task())
      std::fprintf(stderr, "srun task 0: error: MPI_COMM_WORLD has 1 rank in a %d-task srun step (see above)\n", tasks);
    MPI_Finalize();
    return 1;
  }
  int code = 1;
  try {
    SKEW_CHECK(provided >= MPI_THREAD_MULTIPLE,
               "MPI library provides thread level " << provided << " < MPI_THREAD_MULTIPLE");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    SKEW_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &failure_comm));
    Runtime rt;
    SKEW_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rt.world_rank));
    SKEW_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &rt.world_size));
    MPI_Comm local;
    SKEW_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt.world_rank, MPI_INFO_NULL, &local));
    SKEW_MPI_CHECK(MPI_Comm_rank(local, &rt.local_rank));
    SKEW_MPI_CHECK(MPI_Comm_size(local, &rt.local_size));
    MPI_Comm_free(&local);
    log::set_rank(rt.world_rank, rt.world_size);
    if (bind_gpu && cuda_device_count() > 0) bind_local_gpu(rt);
    rt.world = std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD);
    code = body(rt);
    rt.world.reset();
  } catch (const std::bad_alloc&) {
    // The large allocations are checked before the work and named when they fail (allocating(),
    // core/memory_limits.hpp): this is one of the many small ones.
    abort_job(
        "out of memory (std::bad_alloc) in one of the run's smaller allocations: give the process more "
        "memory, or make the run smaller (its model and data keys)");
  } catch (const std::exception& e) {
    if (failure_comm == MPI_COMM_NULL) abort_job(error_line(e));
    end_failed_run(error_line(e), 1);
  }
  MPI_Comm_free(&failure_comm);
  MPI_Finalize();
  return code;
}

}  // namespace skew::comm
