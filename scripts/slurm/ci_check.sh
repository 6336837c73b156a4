#!/usr/bin/env bash
# The Slurm check: on a one-node Slurm (scripts/slurm/local_cluster.sh, started here unless one
# is already up, and stopped again), submits each scripts/slurm/*.sbatch as shipped, with no
# sbatch options (their #SBATCH defaults: 2 tasks of 1 CPU on one node; app keys shorten the
# runs) and checks that each runs on that shape; submits moe_train.sbatch with a config whose
# expert count is not a multiple of the tasks and checks that the script raises it; runs
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
srun_shape=(--nodes=1 --ntasks=2 --cpus-per-task=1 --time=5)
declare -A small=(
  [moe_train]="--train.iterations=10 --train.eval_interval=10 --train.log_interval=5"
  [wide_train]="--train.epochs=1"
  [preduce_train]="--train.steps=100"
)
declare -A config=([moe_train]=configs/moe.ini [wide_train]=configs/wide.ini [preduce_train]=configs/preduce.ini)
start=$SECONDS

# sbatch, no shape options: the job log lands in the --chdir directory (the scripts' relative
# --output), the scripts themselves work from the submit directory (this checkout).
declare -A job_app job_want
failed=()
submit() {  # name, what its log must say, script, keys...
  local name=$1 want=$2 script=$3 id
  shift 3
  if ! id=$(sbatch --parsable --chdir="$work" "$script" "$@" 2>"$work/sbatch-$name.err"); then
    echo "FAIL sbatch $script ($name): rejected at submission: $(cat "$work/sbatch-$name.err")" >&2
    failed+=("sbatch $name (not submitted)")
    return
  fi
  jobs+=("$id")
  job_app[$id]=$name
  job_want[$id]=$want
}
for app in "${apps[@]}"; do
  # shellcheck disable=SC2086
  submit "$app" "$app: 2 tasks x 1 CPUs on 1 node(s)" "scripts/slurm/$app.sbatch" ${small[$app]}
done
# 3 experts on 2 tasks: the script must pass the next multiple, 4.
sed 's/^num_experts = .*/num_experts = 3/' configs/moe.ini >"$work/moe_3_experts.ini"
# shellcheck disable=SC2086
SKEW_CONFIG=$work/moe_3_experts.ini submit moe_train_3_experts "using 4; choose with --moe.num_experts" \
  scripts/slurm/moe_train.sbatch ${small[moe_train]}
# srun from the login node: a job of its own with one step of 2 tasks.
declare -A srun_log srun_want
for app in "${apps[@]}"; do
  # shellcheck disable=SC2086
  srun -J "ci-srun-$app" "${srun_shape[@]}" --mpi=pmix "$build/apps/$app" \
    --config "${config[$app]}" ${small[$app]} >"$work/srun-$app.log" 2>&1 &
  pids+=($!)
  srun_log[$!]=$work/srun-$app.log
  srun_want[$!]=$app
done
# without PMI: must fail, naming the fix
srun -J ci-srun-nopmi "${srun_shape[@]}" --mpi=none "$build/apps/moe_train" \
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
  log=$work/moe_train-$id.out
  [[ $app == moe_train_3_experts ]] || log=$work/$app-$id.out
  info=$(scontrol -o show job "$id" 2>/dev/null || true)
  exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")
  reason=$(sed -n 's/.* Reason=\([^ ]*\).*/\1/p' <<<"$info")
  if [[ ${state[$id]} == COMPLETED && $exit_code == 0:0 ]] && grep -q "\"app\":\"${app%_3_experts}\"" "$log" &&
    grep -qF "${job_want[$id]}" "$log"; then
    echo "ok   sbatch $app: job $id COMPLETED, log says '${job_want[$id]}'"
    rm -rf "out/slurm/${app%_3_experts}-$id"
  else
    echo "FAIL sbatch $app: job $id ${state[$id]:-unknown}, exit code ${exit_code:-?}, reason ${reason:-?}" >&2
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
