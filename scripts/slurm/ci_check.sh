#!/usr/bin/env bash
# The Slurm check: on a one-node Slurm (scripts/slurm/local_cluster.sh, started here unless one
# is already up, and stopped again), submits each scripts/slurm/*.sbatch as shipped (with sbatch
# options and app keys that shrink the run to 2 tasks on 1 CPU each), runs
# `srun -n 2 --mpi=pmix` of each app on a small config, and checks that a direct launch without
# PMI (`srun --mpi=none`) fails with a message naming `srun --mpi=pmix`. Exits non-zero naming
# every job that did not complete, with its log. Needs root (local_cluster.sh) and the apps in
# ${SKEW_BUILD_DIR:-build} (scripts/build.sh). About half a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${SKEW_BUILD_DIR:-build}
deadline_s=${SKEW_SLURM_CI_TIMEOUT:-150}
apps=(moe_train wide_train preduce_train)
for app in "${apps[@]}"; do
  [[ -x $build/apps/$app ]] || {
    echo "slurm check: $build/apps/$app not built (scripts/build.sh)" >&2
    exit 1
  }
done

cluster=scripts/slurm/local_cluster.sh
eval "$($cluster env)"
started_cluster=0
work=$(mktemp -d /tmp/skew-slurm-ci.XXXXXX)
passed=0
jobs=()   # sbatch job ids
pids=()   # background srun processes
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ ${#jobs[@]} -gt 0 ]]; then scancel "${jobs[@]}" 2>/dev/null || true; fi
  if [[ $started_cluster == 1 ]]; then $cluster stop || true; fi
  if [[ $passed == 1 ]]; then rm -rf "$work"; else echo "slurm check: logs kept in $work" >&2; fi
}
trap cleanup EXIT
trap "exit 130" INT TERM
if ! $cluster status >/dev/null 2>&1; then
  started_cluster=1  # stopped again on exit, also when start fails half way
  $cluster start
fi

# Two ranks on one CPU each (2 shared cores); Open MPI yields instead of busy-polling.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
shape=(--nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5)
declare -A small=(
  [moe_train]="--train.iterations=10 --train.eval_interval=10 --train.log_interval=5"
  [wide_train]="--train.epochs=1"
  [preduce_train]="--train.steps=100"
)
declare -A config=([moe_train]=configs/moe.ini [wide_train]=configs/wide.ini [preduce_train]=configs/preduce.ini)
start=$SECONDS

# sbatch: the job log lands in the --chdir directory (the scripts' relative --output), the
# scripts themselves work from the submit directory (this checkout).
declare -A job_app
failed=()
for app in "${apps[@]}"; do
  # shellcheck disable=SC2086
  if ! id=$(sbatch --parsable --chdir="$work" "${shape[@]}" "scripts/slurm/$app.sbatch" ${small[$app]} 2>"$work/sbatch-$app.err"); then
    echo "FAIL sbatch scripts/slurm/$app.sbatch: rejected at submission: $(cat "$work/sbatch-$app.err")" >&2
    failed+=("sbatch $app (not submitted)")
    continue
  fi
  jobs+=("$id")
  job_app[$id]=$app
done
# srun from the login node: a job of its own with one step of 2 tasks.
declare -A srun_log srun_want
for app in "${apps[@]}"; do
  # shellcheck disable=SC2086
  srun -J "ci-srun-$app" "${shape[@]/--ntasks-per-node=2/--ntasks=2}" --mpi=pmix "$build/apps/$app" \
    --config "${config[$app]}" ${small[$app]} >"$work/srun-$app.log" 2>&1 &
  pids+=($!)
  srun_log[$!]=$work/srun-$app.log
  srun_want[$!]=$app
done
# without PMI: must fail, naming the fix
srun -J ci-srun-nopmi "${shape[@]/--ntasks-per-node=2/--ntasks=2}" --mpi=none "$build/apps/moe_train" \
  --config configs/moe.ini --train.iterations=1 >"$work/srun-nopmi.log" 2>&1 &
nopmi_pid=$!

show() {  # name, log file
  echo "---- $1: $2" >&2
  tail -n 40 "$2" >&2 2>/dev/null || echo "(no log)" >&2
  echo "----" >&2
}
job_id_named() { scontrol -o show job 2>/dev/null | sed -n "s/^JobId=\([0-9]*\) JobName=$1 .*/\1/p" | tail -n 1; }

# Wait for the sbatch jobs: each must end COMPLETED with exit code 0 and its app's summary line.
terminal='COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE'
declare -A state
while :; do
  pending=0
  for id in "${jobs[@]}"; do
    [[ ${state[$id]:-} =~ ^($terminal)$ ]] && continue
    state[$id]=$(scontrol -o show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    [[ ${state[$id]} =~ ^($terminal)$ ]] || pending=1
  done
  ((pending == 0)) && break
  if ((SECONDS - start > deadline_s)); then
    echo "slurm check: gave up after ${deadline_s} s; queue:" >&2
    squeue >&2 || true
    break
  fi
  sleep 1
done
for id in "${jobs[@]}"; do
  app=${job_app[$id]}
  log=$work/$app-$id.out
  info=$(scontrol -o show job "$id" 2>/dev/null || true)
  exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")
  reason=$(sed -n 's/.* Reason=\([^ ]*\).*/\1/p' <<<"$info")
  if [[ ${state[$id]} == COMPLETED && $exit_code == 0:0 ]] && grep -q "\"app\":\"$app\"" "$log"; then
    echo "ok   sbatch scripts/slurm/$app.sbatch: job $id COMPLETED"
    rm -rf "out/slurm/$app-$id"
  else
    echo "FAIL sbatch scripts/slurm/$app.sbatch: job $id ${state[$id]:-unknown}, exit code ${exit_code:-?}, reason ${reason:-?}" >&2
    show "job $id log" "$log"
    failed+=("sbatch $app (job $id)")
  fi
done

# The srun processes: bounded by what is left of the deadline.
wait_pid() {  # pid: its exit status, or 124 when it outlives the deadline
  local pid=$1
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS - start > deadline_s)); then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 124
    fi
    sleep 0.5
  done
  wait "$pid"
}
for pid in "${pids[@]}"; do
  app=${srun_want[$pid]}
  rc=0
  wait_pid "$pid" || rc=$?
  id=$(job_id_named "ci-srun-$app")
  if [[ $rc == 0 ]] && grep -q "\"app\":\"$app\"" "${srun_log[$pid]}"; then
    echo "ok   srun -n 2 --mpi=pmix $app: job $id completed"
  else
    echo "FAIL srun -n 2 --mpi=pmix $app: job ${id:-?} exit status $rc$( ((rc == 124)) && echo " (timed out)")" >&2
    show "srun $app log" "${srun_log[$pid]}"
    failed+=("srun $app (job ${id:-?})")
  fi
done
rc=0
wait_pid "$nopmi_pid" || rc=$?
if [[ $rc != 0 && $rc != 124 ]] && grep -q -- "srun --mpi=pmix" "$work/srun-nopmi.log"; then
  echo "ok   srun --mpi=none moe_train: fails naming srun --mpi=pmix"
else
  echo "FAIL srun --mpi=none moe_train: exit status $rc, expected a failure whose message names srun --mpi=pmix" >&2
  show "srun --mpi=none log" "$work/srun-nopmi.log"
  failed+=("srun --mpi=none (job $(job_id_named ci-srun-nopmi))")
fi
pids=()

echo "slurm check: $((SECONDS - start)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "slurm check FAILED: ${failed[*]}" >&2
  exit 1
fi
passed=1
echo "slurm check passed"
