#include "mpi/launch_check.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace skew::comm {
namespace {

bool has_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::atoi(v);
}

// Tasks of this srun step, or 0 when this process is no srun task (a batch script's own step
// sets no step id; mpirun's ranks carry OMPI_COMM_WORLD_SIZE).
int srun_step_tasks() {
  if (!has_env("SLURM_STEP_ID") && !has_env("SLURM_STEPID")) return 0;
  if (has_env("OMPI_COMM_WORLD_SIZE")) return 0;      // started by mpirun (its daemons run as a step)
  const int tasks = env_int("SLURM_STEP_NUM_TASKS");  // srun's own; SLURM_NTASKS is the allocation's
  return tasks > 1 ? tasks : 0;
}

// Whether a PMI server is visible: srun --mpi=pmix sets PMIX_RANK, PMIX_NAMESPACE, ...;
// --mpi=pmi2 sets PMI_FD, PMI_RANK, PMI_SIZE; MPICH's and Intel MPI's launchers set PMI_RANK or
// PMI_FD.
bool pmi_visible() {
  for (const char* name : {"PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_FD", "PMI_SIZE", "PMI_ID"})
    if (has_env(name)) return true;
  return false;
}

}  // namespace

int srun_tasks_without_pmi() {
  return pmi_visible() ? 0 : srun_step_tasks();
}

namespace {

// The singleton's private session directory (empty when none was made), removed at exit.
std::string& private_session_base() {
  static std::string path;
  return path;
}

void remove_private_session_base() {
  std::error_code ignored;
  std::filesystem::remove_all(private_session_base(), ignored);
}

// A fresh directory under $TMPDIR (else /tmp) for this process's Open MPI session files, or ""
// when none can be made.
std::string make_private_session_base() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/skew-mpi-XXXXXX";
  return ::mkdtemp(pattern.data()) == nullptr ? std::string() : pattern;
}

}  // namespace

void prefer_quick_singleton_start() {
  if (pmi_visible() || has_env("OMPI_COMM_WORLD_SIZE")) return;
  ::setenv("OMPI_MCA_pml", "ob1", /*overwrite=*/0);
  // Open MPI's topology load reads every PCI device's config space through sysfs (hwloc's I/O
  // discovery: linuxio, else libpciaccess's pci), slow where each read traps to a hypervisor: 14
  // of a 27 ms start here. A singleton binds to cores only (GPUs by their runtime's index).
  ::setenv("HWLOC_COMPONENTS", "-linuxio,-pci", /*overwrite=*/0);
  if (has_env("OMPI_MCA_ess_singleton_isolated") || has_env("OMPI_MCA_orte_tmpdir_base")) return;
  const std::string base = make_private_session_base();
  if (base.empty()) return;
  private_session_base() = base;
  std::atexit(remove_private_session_base);  // registered before MPI_Init: runs after its own
  ::setenv("OMPI_MCA_orte_tmpdir_base", base.c_str(), 1);
  ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 1);
}

int srun_tasks_as_singleton(int world_size) {
  return world_size == 1 ? srun_step_tasks() : 0;
}

bool first_srun_task() {
  return !has_env("SLURM_PROCID") || env_int("SLURM_PROCID") == 0;
}

std::string srun_pmi_message(int tasks) {
  std::ostringstream s;
  s << "srun started " << tasks
    << " tasks without PMI support for MPI (no PMIX_* or PMI_* variables in the environment), so MPI "
       "cannot join them into one job: launch with `srun --mpi=pmix` (Debian's and most Open MPI "
       "builds; `srun --mpi=list` shows what this Slurm offers, and SLURM_MPI_TYPE=pmix or "
       "MpiDefault=pmix in slurm.conf make it the default), or with mpirun inside the allocation";
  return s.str();
}

}  // namespace skew::comm
