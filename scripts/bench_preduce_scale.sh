#!/usr/bin/env bash
# P-Reduce against tuned baselines at scale (issue 37, items 4-5): the simulator, 64 (or 256)
# workers, MLP 784-32-10 on MNIST (configs/preduce_mnist.ini), target 90%, communication 0.5-4x
# a step (each scenario's sim.bandwidth_gbs), on the scenarios of results/preduce/scale_study:
# dev.txt (tuning) and heldout.txt (reported; committed before any tuning).
#   1. dev, learning rate: every mode at lr 0.2, 0.4, 0.8, 1.6 with a middle structure (eager
#      solo 1 ms, P = 4 for both P-Reduce rows).
#   2. dev, structure: at the mode's best lr from step 1, eager's quorum {solo, majority} x
#      deadline {0.25, 0.5, 1, 2, 5} ms and P in {2, 4, 8, auto} for the paper's blocking
#      P-Reduce and for the overlap+refresh variant. (A coordinate search, lr then structure:
#      the full product is 4x the runs and does not fit 15 minutes on this machine.)
#      Each mode's tuned setting is the one with the lowest mean time to target over the whole
#      development set (one setting per mode): tuned.txt, dev.csv.
#   3. heldout: each mode at its tuned setting on every held-out scenario and seed: results.csv
#      and results.md (time to target per scenario and mode; best tuned baseline / P-Reduce for
#      both P-Reduce rows, mean and worst over the scenarios).
# Time to target: the trailing-window score (train.target_accuracy), plus P = auto's warm-up; a
# run that never reaches it counts as its virtual length (dev 3 s, held-out 4 s; censored,
# counted). All-reduce runs 300 synchronous steps.
#   scripts/bench_preduce_scale.sh [BUILD_DIR]     64 workers: about 15 minutes on 2 busy cores
#   WORKERS=256 ...                                the same study at 256 workers (about 4x longer)
#   STEPS=heldout ...                              only step 3 (uses the run folder's tuned.txt)
#   REUSE=1 ...                                    keeps runs already in the run folder
#   JOBS=N ...                                     runs at once (default 2)
#   SMOKE=1 ...                                    8 workers, one scenario and seed per set, one
#                                                  value per knob, 0.3 s: not a measurement
# Run directory: scripts/run_dir.sh (out/bench_preduce_scale/<UTC time>/ or OUT), a copy of
# results/preduce/scale_study; RECORD=1 replaces that claim folder with it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/progress.sh
source scripts/bench_preduce_variants.sh
run_dir_start bench_preduce_scale "WORKERS STEPS REUSE JOBS" "$@"
build="${1:-build}"
app="$build/apps/preduce_train"
run_dir_require_apps "$build" preduce_train
out=$RUN_DIR
run_dir_claim results/preduce/scale_study "$out"
scripts/fetch/mnist.sh data/mnist >/dev/null
export OPENBLAS_NUM_THREADS=1
workers=${WORKERS:-64}
steps="${STEPS:-dev heldout}"
lrs="0.2 0.4 0.8 1.6" deadlines="0.25 0.5 1 2 5" quorums="solo majority" group_sizes="p2 p4 p8 auto"
dev_s=3 heldout_s=4
if [[ ${SMOKE:-0} == 1 ]]; then
  workers=8 lrs="0.4" deadlines="1" quorums="solo" group_sizes="p4" dev_s=0.3 heldout_s=0.3
fi
common=(--config configs/preduce_mnist.ini --simulate --model.hidden=32 --train.eval_interval_s=0.1
        --train.target_accuracy=0.9 --train.log_interval=0 --sim.workers="$workers")

# set_lines SET_FILE KIND: its "model" lines, or its seeds (the first only with SMOKE=1).
set_lines() {
  local lines
  if [[ $2 == models ]]; then lines=$(awk '$1 == "model"' "$1"); else lines=$(awk '$1 == "seeds" {$1 = ""; print}' "$1" | xargs); fi
  if [[ ${SMOKE:-0} == 1 ]]; then head -1 <<<"$lines" | { if [[ $2 == models ]]; then cat; else awk '{print $1}'; fi; }; else echo "$lines"; fi
}

# sweep SET RUNS_DIR SECONDS VARIANT...: every variant on every scenario and seed of SET, JOBS at once.
sweep() {
  local set_file=$1 runs=$2 seconds=$3
  shift 3
  [[ ${SMOKE:-0} == 1 ]] || grep -qE "^workers( .*)? $workers( |$)" "$set_file" || { echo "bench_preduce_scale: $set_file does not list $workers workers" >&2; exit 2; }
  mkdir -p "$runs"
  local models seeds model args seed v tag flags
  models=$(set_lines "$set_file" models)
  seeds=$(set_lines "$set_file" seeds)
  progress_begin $(($(wc -l <<<"$models") * $(wc -w <<<"$seeds") * $#))
  while read -r _ model args; do
    for seed in $seeds; do
      for v in "$@"; do
        tag="${model}_${v}_s$seed"
        progress_next "bench_preduce_scale n$workers $tag"
        [[ ${REUSE:-0} == 1 && -s "$runs/$tag.json" ]] && continue
        flags=$(variant_args "$v")
        while (($(jobs -rp | wc -l) >= ${JOBS:-2})); do wait -n; done
        # shellcheck disable=SC2086
        ("$app" --output.dir= "${common[@]}" --train.max_seconds="$seconds" $args $flags --train.seed="$seed" | tail -1 >"$runs/$tag.json.tmp" &&
          mv "$runs/$tag.json.tmp" "$runs/$tag.json") &
      done
    done
  done <<<"$models"
  wait
}

report() { /usr/bin/python3 scripts/preduce_scale_report.py "$1" "$out" "$workers"; }
runs="$out/runs/n$workers"
if [[ " $steps " == *" dev "* ]]; then
  stage_lr=()
  for lr in $lrs; do
    stage_lr+=("allreduce_lr$lr" "adpsgd_lr$lr" "eager_solo_1ms_lr$lr" "preduce_blocking_p4_lr$lr" "preduce_overlap_p4_lr$lr")
  done
  sweep "$out/dev.txt" "$runs/dev" "$dev_s" "${stage_lr[@]}"
  report tune
  stage_structure=()
  lr_of() { grep "^$1 " "$out/tuned_n$workers.txt" | sed 's/.*_lr//'; }
  for q in $quorums; do
    for d in $deadlines; do stage_structure+=("eager_${q}_${d}ms_lr$(lr_of eager)"); done
  done
  for p in $group_sizes; do
    stage_structure+=("preduce_blocking_${p}_lr$(lr_of preduce_blocking)" "preduce_overlap_${p}_lr$(lr_of preduce_overlap)")
  done
  REUSE=1 sweep "$out/dev.txt" "$runs/dev" "$dev_s" "${stage_structure[@]}"
  report tune
fi
if [[ " $steps " == *" heldout "* ]]; then
  read -ra tuned < <(awk '{print $2}' "$out/tuned_n$workers.txt" | xargs)
  sweep "$out/heldout.txt" "$runs/heldout" "$heldout_s" "${tuned[@]}"
  report heldout
  {
    echo "command: $run_dir_command (build $build)"
    echo "commit: $run_dir_code_commit"
    echo "config: configs/preduce_mnist.ini ${common[*]:2}; dev ${dev_s} s, held-out ${heldout_s} s virtual"
    echo "machine: $(uname -srm), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) (virtual time: the load does not change the numbers)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$out/manifest_n$workers.txt"
fi
run_dir_finish
