// Helper for the failure tests: run under mpirun by ctest. Modes:
//   ok      every rank reports its runtime and returns 0
//   throw   the last rank throws while the others wait in a barrier; run_main must print
//           "rank R: error: ..." and end the job (MPI_Abort) instead of hanging
//   throw_all   every rank throws the same message: rank 0 alone prints "error: ...", and the
//               job ends with status 1 without MPI_Abort
//   throw_each  every rank throws its own message: each prints "rank R: error: ..."
//   exit3   the body returns 3 on every rank; that becomes the process exit code
//   env     prints the Open MPI settings run_main chose for a quick singleton start
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "mpi/runtime.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  return skew::comm::run_main(argc, argv, /*bind_gpu=*/false, [&](skew::comm::Runtime& rt) {
    if (mode == "throw") {
      if (rt.world_rank == rt.world_size - 1) SKEW_THROW("deliberate failure on the last rank");
      rt.world->barrier();  // never completes: the failing rank does not join
      return 0;
    }
    if (mode == "throw_all") SKEW_THROW("deliberate failure on every rank");
    if (mode == "throw_each") SKEW_THROW("deliberate failure number " << rt.world_rank);
    if (mode == "exit3") return 3;
    if (mode == "env") {
      const auto value = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "unset"; };
      std::printf("pml=%s isolated=%s tmpdir_base=%s hwloc=%s\n", value("OMPI_MCA_pml"),
                  value("OMPI_MCA_ess_singleton_isolated"), value("OMPI_MCA_orte_tmpdir_base"),
                  value("HWLOC_COMPONENTS"));
      // Open MPI's session directory (ompi.HOST.UID) lies in the private base while MPI runs.
      std::error_code unreadable;
      if (const char* base = std::getenv("OMPI_MCA_orte_tmpdir_base"); base != nullptr)
        for (const auto& entry : std::filesystem::directory_iterator(base, unreadable))
          if (entry.path().filename().string().rfind("ompi.", 0) == 0) std::printf("session directory in base\n");
      return 0;
    }
    std::printf("rank %d of %d, local %d of %d, device %d, world group size %d\n", rt.world_rank, rt.world_size,
                rt.local_rank, rt.local_size, rt.cuda_device, rt.world->size());
    return rt.world->size() == rt.world_size && rt.local_rank < rt.local_size ? 0 : 1;
  });
}
