#!/usr/bin/env bash
# Issue 36 item 4: wide_train LR, FM k=16 and FFM k=4 at 1 and 2 threads, ROUNDS interleaved
# rounds (default 3), 3 epochs of the 200k-row peers split's 180k training rows (data/peers, made
# by scripts/bench_wide_peers.sh or scripts/wide_split.sh), flow, AdaGrad, lr 0.1 / 0.2 / 0.5,
# with train.profile: one CSV line a run, with the 1-minute load before it, rows/s, and per step
# the pool's passes (wall time, each thread's CPU time) and the time outside them.
# Usage (repository root): results/wide/peers_threads/measure.sh [WIDE_TRAIN] > runs.csv
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${1:-build-cpu/apps/wide_train}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "round,model,threads,load_1min,rows_per_s,step_us,outside_passes_us,passes (wall_us cpu_us per thread)"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for model in lr fm ffm; do
    for threads in 1 2; do
      case $model in lr) lr=0.1 fmt=libsvm k=1 ;; fm) lr=0.2 fmt=libsvm k=16 ;; ffm) lr=0.5 fmt=libffm k=4 ;; esac
      load=$(cut -d' ' -f1 /proc/loadavg)
      "$bin" --data.train="data/peers/main_train.$fmt" --data.valid= --output.dir= --model.type="$model" \
        --model.k="$k" --train.lr="$lr" --train.epochs=3 --train.threads="$threads" --train.profile=true 2>&1 |
        tail -1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["step_profile"]
passes = " | ".join("%.0f %s" % (q["wall_us"], "/".join("%.0f" % c for c in q["thread_cpu_us"])) for q in p["passes"])
print("%s,%.0f,%.0f,%.1f,%s" % (sys.argv[1], d["train_samples_per_s"], p["step_us"], p["outside_passes_us"], passes))
' "$round,$model,$threads,$load"
    done
  done
done
