#!/usr/bin/env bash
# Partial reduce against all-reduce, AD-PSGD and eager-SGD under a straggler (MLP 784-256-128-10
# on MNIST, configs/preduce_mnist.ini: 4 workers, one 4x slower, exponential jitter on all).
#   1. real: mpirun -np 4, REPEATS times, modes interleaved (on 2 cores the ranks share CPUs; the
#      injected delays are real sleep); time to accuracy is the median over the repeats
#   2. the simulator at N = 4, given the per-step costs measured in step 1 for the same mode,
#      and its time-to-accuracy error against the real median
#   3. the simulator at N = 32 and 256 (a smaller MLP, 784-32-10, to fit this machine), for
#      train.seed = 1..SCALE_SEEDS; time to accuracy is the median over the seeds
# Writes two claim folders: results/preduce/mnist_4rank/ (steps 1 and 2) and
# results/preduce/sim_scale/ (step 3), each a results.csv and a tta.png
# (scripts/preduce_report.py) over the runs' curve_*.csv and summary_*.json in its runs/
# (mnist_4rank/runs/ also holds calibration.txt).
# Both folders go to a run directory (scripts/run_dir.sh: out/bench_preduce/<UTC time>/mnist_4rank
# and .../sim_scale, or under OUT); RECORD=1 replaces the claim folders with them.
#   scripts/bench_preduce.sh [BUILD_DIR]     (default build; about 15 minutes on 2 busy cores)
#   SMOKE=1 scripts/bench_preduce.sh ...     one repeat, 1 s runs (all-reduce 20 steps), not a
#                                            measurement (RECORD=1 refused)
#   REPEATS=1 scripts/bench_preduce.sh ...   one real run per mode
#   BENCH_REUSE_REAL=1 scripts/bench_preduce.sh ...   keeps existing real-run results
#   BENCH_REUSE_SCALE=1 scripts/bench_preduce.sh ...  keeps existing N = 32 and 256 results
#   SCALE_SEEDS=6 scripts/bench_preduce.sh ...        seeds per mode at N = 32 and 256 (default 1;
#                                                     6 take about 25 minutes more)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/progress.sh
run_dir_start bench_preduce "REPEATS BENCH_REUSE_REAL BENCH_REUSE_SCALE SCALE_SEEDS" "$@"
build="${1:-build}"
app="$build/apps/preduce_train"
run_dir_require_apps "$build" preduce_train
real_out=$RUN_DIR/mnist_4rank   # N = 4: real runs and their simulation
scale_out=$RUN_DIR/sim_scale     # the simulator at N = 32 and 256
run_dir_claim results/preduce/mnist_4rank "$real_out"
run_dir_claim results/preduce/sim_scale "$scale_out"
repeats="${REPEATS:-3}"
scale_seeds="${SCALE_SEEDS:-1}"
smoke=()
if [[ ${SMOKE:-0} == 1 ]]; then
  repeats=1 scale_seeds=1 smoke=(--train.max_seconds=1)
fi
mkdir -p "$real_out/runs" "$scale_out/runs"
scripts/fetch/mnist.sh data/mnist
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cfg=configs/preduce_mnist.ini
variants=(
  "allreduce|--sync.mode=allreduce"
  "preduce_p2|--sync.mode=preduce --preduce.group_size=2 --preduce.overlap=true"
  "preduce_p3|--sync.mode=preduce --preduce.group_size=3 --preduce.overlap=true"
  "preduce_p2_blocking|--sync.mode=preduce --preduce.group_size=2 --preduce.overlap=false --preduce.refresh_staleness=0"
  "preduce_p3_blocking|--sync.mode=preduce --preduce.group_size=3 --preduce.overlap=false --preduce.refresh_staleness=0"
  "adpsgd|--sync.mode=adpsgd"
  "eager|--sync.mode=eager"
  "allreduce_homogeneous|--sync.mode=allreduce --hetero.slowdown=1,1,1,1"
)
# allreduce_homogeneous is the bound: all-reduce without the straggler (every worker fast), the
# time to accuracy of the same total batch with nothing to tolerate.
# allreduce stops by steps (every round needs every worker); the others stop by time.
sync_steps=1000
[[ ${SMOKE:-0} == 1 ]] && sync_steps=20
run() {  # run KIND N TAG_SUFFIX NAME ARGS...
  local kind=$1 n=$2 suffix=$3 name=$4
  shift 4
  [[ $name == allreduce* ]] && set -- "$@" --train.steps="$sync_steps"
  local tag="${kind}_${n}_${name}${suffix}"
  local out="$real_out/runs"
  [[ $n == 4 ]] || out="$scale_out/runs"
  progress_next "bench_preduce $tag"
  if [[ $kind == real ]]; then
    [[ ${BENCH_REUSE_REAL:-0} == 1 && -s "$out/summary_$tag.json" ]] && return
    mpirun --oversubscribe -np "$n" "$app" --output.dir= --config "$cfg" "$@" ${smoke[@]+"${smoke[@]}"} --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
    # The machine (CPU model, load) into the run's summary; its figures to 4 significant digits.
    /usr/bin/python3 scripts/bench_record.py "$out/summary_$tag.json" "$n" "$tag" wall_s steps time_to_target_s \
      final_accuracy_mean
  else
    [[ ${BENCH_REUSE_SCALE:-0} == 1 && $n != 4 && -s "$out/summary_$tag.json" ]] && return
    "$app" --output.dir= --config "$cfg" --simulate --sim.workers="$n" "$@" ${smoke[@]+"${smoke[@]}"} --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
  fi
}
# Real runs, their N = 4 simulations, then N = 32 and 256 for each seed: one line each.
progress_begin $(((repeats + 1 + 2 * scale_seeds) * ${#variants[@]}))
for r in $(seq 1 "$repeats"); do
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    run real 4 "_r$r" "${v%%|*}" ${v#*|}
  done
done
# Costs measured on the real ranks of each mode (mean over repeats) drive its N = 4 simulation:
#   compute: per step, mean over workers (the slowdown scales it, as in the real run);
#   overhead: the unaccounted time per step (end - compute - injected - wait - comm: sleep
#     overshoot and loop overhead on shared cores), which the slowdown does not scale;
#   latency: one reduction, the least-waiting worker's comm per step (adpsgd and overlapped
#     preduce: the communication thread's time per averaging, mean over workers);
#   controller: preduce/eager, the part of each wait that is controller and message latency, per
#     step (per averaging when overlapped).
calibrate() {
  python3 - "$real_out/runs" "$1" "$repeats" <<'PY'
import json, sys
out, mode, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
compute = overhead = latency = controller = 0.0
for r in range(1, repeats + 1):
    ws = json.load(open(f"{out}/summary_real_4_{mode}_r{r}.json"))["per_worker"]
    background = "sync_wait_s" in ws[0]  # adpsgd, overlapped preduce: comm off the computing path
    steps = [w["steps_per_s"] * w["end_s"] for w in ws]
    per = [w["syncs"] for w in ws] if background else steps
    compute += sum(w["compute_s"] / n for w, n in zip(ws, steps)) / len(ws) / repeats
    overhead += sum((w["end_s"] - w["compute_s"] - w["injected_s"] - w["wait_s"] - (0 if background else w["comm_s"])) / n
                    for w, n in zip(ws, steps)) / len(ws) / repeats
    if background:
        latency += sum(w["comm_s"] / max(p, 1) for w, p in zip(ws, per)) / len(ws) / repeats
    else:
        latency += min(w["comm_s"] / n for w, n in zip(ws, steps)) / repeats
    controller += sum(w.get("controller_s", 0.0) / max(p, 1) for w, p in zip(ws, per)) / len(ws) / repeats
print(f"--sim.compute_ms={1e3 * compute:.4f} --sim.overhead_ms={1e3 * overhead:.4f} --sim.latency_ms={1e3 * latency:.4f} "
      f"--sim.controller_ms={1e3 * controller:.4f}")
PY
}
rm -f "$real_out/runs/calibration.txt"
for v in "${variants[@]}"; do
  cal=$(calibrate "${v%%|*}")
  echo "bench_preduce: ${v%%|*} measured $cal" >&2
  echo "${v%%|*} $cal" >>"$real_out/runs/calibration.txt"
  # shellcheck disable=SC2086
  run sim 4 "" "${v%%|*}" ${v#*|} $cal
done
[[ ${SMOKE:-0} == 1 ]] || sync_steps=250
scale=(--model.hidden=32 --train.eval_interval_s=0.1 --train.target_accuracy=0.9)
((${#smoke[@]})) || scale+=(--train.max_seconds=6)  # smoke's own; a key given twice is refused
for n in 32 256; do
  for seed in $(seq 1 "$scale_seeds"); do
    for v in "${variants[@]}"; do
      # shellcheck disable=SC2086
      run sim "$n" "_s$seed" "${v%%|*}" ${v#*|} "${scale[@]}" --train.seed="$seed"
    done
  done
done
# Time to accuracy per mode (median over repeats / seeds), results.csv and tta.png in each folder.
"${PYTHON:-/usr/bin/python3}" scripts/preduce_report.py "$real_out" "$scale_out" "$repeats" "$scale_seeds"
run_dir_finish
