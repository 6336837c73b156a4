// Recognises a task that srun started without PMI support for MPI (srun without --mpi=pmix on a
// cluster whose MpiDefault is none): MPI then either aborts in MPI_Init (Debian's Open MPI, with
// a message that does not name the fix) or starts every task as its own 1-rank MPI_COMM_WORLD.
// Both checks read only the environment Slurm and the MPI launchers set.
#pragma once
#include <string>

namespace skew::comm {

// Before MPI_Init: the step's task count when this process is a task of a multi-task srun step
// and no PMI server is visible (no PMIX_*, PMI_* or mpirun's OMPI_COMM_WORLD_* variables);
// 0 otherwise.
int srun_tasks_without_pmi();

// After MPI_Init: the step's task count when this process is a task of a multi-task srun step
// not launched by mpirun, yet MPI_COMM_WORLD has `world_size` 1; 0 otherwise.
int srun_tasks_as_singleton(int world_size);

// Whether this process is Slurm's task 0 of its step (or not under srun): the one that prints.
bool first_srun_task();

// Before MPI_Init, for a process no MPI launcher started (no mpirun/OMPI_COMM_WORLD_*, PMIX_* or
// PMI_* variables: a 1-rank singleton, such as `wide_train` run from a shell), Open MPI's quick
// start: the ob1 messaging layer unless the user chose one, so that a job of one rank does not
// probe the network through UCX (0.2 s of every run here); hwloc without its PCI discovery
// (HWLOC_COMPONENTS, unless the user set it: 14 ms here); and, unless the user set either,
// ess_singleton_isolated (no singleton daemon: another 0.06 s) with orte_tmpdir_base a private
// directory ($TMPDIR or /tmp, skew-mpi-XXXXXX) removed at exit, because isolated singletons all
// name their session directory alike and one finishing removed it under another starting
// (orte_init failed) when they shared the base. Under a launcher nothing is set: a cluster's
// transport is the launcher's and the user's choice.
void prefer_quick_singleton_start();

// The message naming the fix: `srun --mpi=pmix`.
std::string srun_pmi_message(int tasks);

}  // namespace skew::comm
