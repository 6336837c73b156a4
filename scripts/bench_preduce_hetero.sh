#!/usr/bin/env bash
# Partial reduce against all-reduce, AD-PSGD and eager-SGD under heterogeneity it was not tuned
# on (the simulator: 16 virtual workers, MLP 784-32-10 on MNIST, configs/preduce_mnist.ini,
# target 90% test accuracy, 4 s of virtual time; all-reduce by steps).
#   1. dev: the development set (results/preduce/hetero/dev.txt). Runs the grid the settings
#      are chosen from: AD-PSGD's learning rate, eager-SGD's quorum and deadline, partial reduce
#      at P = 3 (the former hand choice) and P = auto (the rule in lib/preduce/auto_group.hpp),
#      each mode's learning rate. Writes dev.csv and tuned.txt: each mode's setting (all-reduce,
#      partial reduce with P = auto, AD-PSGD, eager-SGD) with the lowest mean time to accuracy
#      over the whole development set (one setting per mode, not per skew).
#   2. heldout: the held-out set (heldout.txt, fixed before step 1 was first run): every mode
#      at its tuned setting over every held-out seed and skew. Writes results.csv (mean time to accuracy
#      per mode and skew with a 95% t-interval over the seeds; partial reduce's ratio to the best
#      baseline with its interval; a verdict per skew), tta.png and manifest.txt.
#   scripts/bench_preduce_hetero.sh [BUILD_DIR]          both steps (JOBS runs at once, default 2)
#   STEPS=heldout scripts/bench_preduce_hetero.sh ...    only step 2 (uses the committed tuned.txt)
#   REUSE=1 scripts/bench_preduce_hetero.sh ...          keeps runs already in runs/
#   JOBS=N scripts/bench_preduce_hetero.sh ...           N runs at once (default 2: the virtual clock makes
#                                                        the results independent of it)
#   SEEDS="101 102 103 104" STEPS=heldout ...            only those seeds of the set (the report too)
#   SMOKE=1 scripts/bench_preduce_hetero.sh ...          each set's first seed, 0.5 s of virtual
#                                                        time: not a measurement (RECORD=1 refused)
# Everything goes to a run directory (scripts/run_dir.sh: out/bench_preduce_hetero/<UTC time>/,
# or OUT) that starts as a copy of results/preduce/hetero (its sets, tuned.txt, runs for REUSE);
# RECORD=1 replaces that claim folder with it.
# P = auto's warm-up window (auto_warmup_s in the summary) is added to its time to accuracy.
# A run that never reaches the target counts as train.max_seconds (censored; flagged).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/progress.sh
source scripts/bench_preduce_variants.sh
run_dir_start bench_preduce_hetero "STEPS REUSE SEEDS DEV_NAMES HELDOUT_NAMES JOBS" "$@"
build="${1:-build}"
app="$build/apps/preduce_train"
run_dir_require_apps "$build" preduce_train
out=$RUN_DIR
run_dir_claim results/preduce/hetero "$out"
steps="${STEPS:-dev heldout}"
scripts/fetch/mnist.sh data/mnist
export OPENBLAS_NUM_THREADS=1
max_seconds=4
[[ ${SMOKE:-0} == 1 ]] && max_seconds=0.5  # one value: a key given twice is refused
common=(--config configs/preduce_mnist.ini --simulate --model.hidden=32 --train.max_seconds="$max_seconds"
        --train.eval_interval_s=0.1 --train.target_accuracy=0.9 --train.log_interval=0)
# Baselines as their papers run them: AD-PSGD (Lian et al., ICML'18) is asynchronous pairwise
# averaging on a bipartite active/passive graph with the synchronous run's learning rate, tuned
# here over {0.1, 0.2, 0.4}; eager-SGD (Li et al., PPoPP'20) is a solo or majority partial
# collective, tuned over quorum {solo, majority} x deadline {2, 5} ms at lr 0.2, and, because the
# first pass chose solo 2 ms at lr 0.4 (two grid edges), also deadlines 0.5-5 ms at lr 0.4-1.6
# around each choice, with its periodic full model average every 10 rounds. All-reduce takes 300
# synchronous steps.
# A variant's name spells its flags (variant_args); the learning rate is the preset's 0.2 unless
# named. Every mode's learning rate is tuned too (0.2, 0.4, and 0.8 once AD-PSGD was best at 0.4, the grid's edge;
# 1.6 once partial reduce, AD-PSGD and eager were best at 0.8; AD-PSGD also 0.1), and partial
# reduce's warm-up window (20 or 5 steps).
dev_names=(allreduce allreduce_lr0.4 allreduce_lr0.8 preduce_auto preduce_auto_lr0.4_w5 preduce_auto_lr0.8_w5 preduce_p3
           adpsgd_lr0.1 adpsgd_lr0.2 adpsgd_lr0.4 adpsgd_lr0.8
           eager_solo_2ms eager_solo_5ms eager_majority_2ms eager_majority_5ms
           eager_solo_2ms_lr0.4 eager_majority_5ms_lr0.4 eager_majority_2ms_lr0.4 eager_solo_1ms_lr0.4
           eager_solo_0.5ms_lr0.4 eager_solo_2ms_lr0.8 eager_solo_1ms_lr0.8 eager_majority_2ms_lr0.8
           eager_majority_0.5ms_lr0.8 eager_majority_1ms_lr0.8 eager_majority_5ms_lr0.8 eager_majority_2ms_lr1.6
           preduce_auto_lr1.6_w5
           adpsgd_lr1.6)
# DEV_NAMES="a b ..." runs only those variants (with REUSE=1: to add variants to a sweep).
[[ -n ${DEV_NAMES:-} ]] && read -ra dev_names <<<"$DEV_NAMES"
dev_variants=()
for name in "${dev_names[@]}"; do dev_variants+=("$name|$(variant_args "$name")"); done
sweep() {  # sweep SET_FILE RUNS_DIR VARIANTS...
  local set_file=$1 runs=$2
  shift 2
  mkdir -p "$runs"
  local workers seeds
  workers=$(awk '$1 == "workers" {print $2}' "$set_file")
  seeds=${SEEDS:-$(awk '$1 == "seeds" {$1 = ""; print}' "$set_file")}
  [[ ${SMOKE:-0} == 1 ]] && read -r seeds _ <<<"$seeds"
  progress_begin $(($(awk '$1 == "model"' "$set_file" | wc -l) * $(wc -w <<<"$seeds") * $#))
  while read -r _ model args; do
    for seed in $seeds; do
      for v in "$@"; do
        local tag="${model}_${v%%|*}_s$seed"
        progress_next "bench_preduce_hetero $tag"
        [[ ${REUSE:-0} == 1 && -s "$runs/$tag.json" ]] && continue
        while (($(jobs -rp | wc -l) >= ${JOBS:-2})); do wait -n; done
        # shellcheck disable=SC2086
        ("$app" --output.dir= "${common[@]}" --sim.workers="$workers" $args ${v#*|} --train.seed="$seed" | tail -1 >"$runs/$tag.json.tmp" &&
          mv "$runs/$tag.json.tmp" "$runs/$tag.json") &
      done
    done
  done < <(awk '$1 == "model"' "$set_file")
  wait
}
if [[ " $steps " == *" dev "* ]]; then
  sweep "$out/dev.txt" "$out/runs/dev" "${dev_variants[@]}"
  /usr/bin/python3 scripts/preduce_hetero_report.py tune "$out"
fi
if [[ " $steps " == *" heldout "* ]]; then
  # Each mode at its tuned setting (HELDOUT_NAMES="a b ...": only those, to add runs).
  heldout_variants=()
  names=$(cat "$out/tuned.txt" 2>/dev/null || true)
  for name in ${HELDOUT_NAMES:-$names}; do heldout_variants+=("$name|$(variant_args "$name")"); done
  sweep "$out/heldout.txt" "$out/runs/heldout" "${heldout_variants[@]}"
  SEEDS="${SEEDS:-}" /usr/bin/python3 scripts/preduce_hetero_report.py report "$out"
  {
    echo "command: scripts/bench_preduce_hetero.sh $build (STEPS=$steps${SEEDS:+, SEEDS=$SEEDS})"
    echo "commit: $run_dir_code_commit"
    echo "config: configs/preduce_mnist.ini ${common[*]:2}; sets: dev.txt (tuning), heldout.txt (reported); tuned: $(tr '\n' ';' <"$out/tuned.txt")"
    echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg) (modelled time on a virtual clock)"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$out/manifest.txt"
fi
run_dir_finish
