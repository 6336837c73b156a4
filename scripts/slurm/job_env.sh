# shellcheck shell=bash disable=SC2034  # its variables are read by the sbatch scripts
# Sourced by scripts/slurm/*.sbatch, from the repository root, inside the job: the shape srun
# runs comes from the allocation sbatch made (its command-line options, else the scripts'
# #SBATCH defaults), never from counts written here.
#   skew_job_setup APP   sets app (the binary), out (out/slurm/<job name>-<job id>),
#                        ntasks, cpus (per task) and srun_shape (srun's options for them)

skew_job_setup() {
  app=${SKEW_BUILD_DIR:-build}/apps/$1
  if [[ ! -x $app ]]; then
    echo "error: $PWD/$app not found: submit from the repository root, after scripts/build.sh" >&2
    exit 1
  fi
  out=out/slurm/${SLURM_JOB_NAME:-$1}-${SLURM_JOB_ID:-0}
  mkdir -p "$out"
  ntasks=${SLURM_NTASKS:-1}
  cpus=${SLURM_CPUS_PER_TASK:-1}
  # Open MPI busy-polls while it waits; if the tasks' threads outnumber the node's CPUs that
  # steals the cores the other ranks compute on (1.7-16x slower under srun): yield instead.
  local tasks_here=${SLURM_TASKS_PER_NODE:-1}
  tasks_here=${tasks_here%%[(,]*}
  if ((tasks_here * cpus > ${SLURM_CPUS_ON_NODE:-1})); then
    export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
  fi
  # srun does not inherit --cpus-per-task from the job since Slurm 22.05: pass it on.
  srun_shape=(--mpi="${SLURM_MPI_TYPE:-pmix}" --ntasks="$ntasks" --cpus-per-task="$cpus")
  echo "$1: $ntasks tasks x $cpus CPUs on ${SLURM_JOB_NUM_NODES:-1} node(s); output in $out"
}
