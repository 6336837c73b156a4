#!/usr/bin/env bash
# wide_train's cost curve: training rows/s and peak resident memory at 200k, 2M and 20M rows of
# synthetic Criteo-like data (39 fields, 2^22 features, as scripts/bench_wide.sh), LR and FM,
# one epoch each, written to libsvm files first (wide_train --export) so that every size is
# read as a file. 200k and 2M are loaded whole; 2M is also streamed, and 20M only streamed,
# with data.max_memory_mb = $STREAM_MB, so the whole-load copy of 20M is never needed. A size
# whose file would not fit the free disk (df, with 20% to spare) is skipped with a message.
# Writes results/wide/cost_curve/cost_curve.csv; peak RSS from /usr/bin/time -v (scripts/setup.sh
# --bench installs it).
# Usage: scripts/cost_curve_wide.sh [BUILD_DIR] (default build); SIZES="200000 2000000 20000000",
# THREADS=2, STREAM_MB=1024, DATA_DIR=data/cost_curve override.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sizes=${SIZES:-200000 2000000 20000000}
threads=${THREADS:-2}
stream_mb=${STREAM_MB:-1024}
data_dir=${DATA_DIR:-data/cost_curve}
out=results/wide/cost_curve
features=4194304
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -x /usr/bin/time ]] || { echo "cost_curve_wide: /usr/bin/time is missing: run scripts/setup.sh --bench" >&2; exit 1; }
mkdir -p "$out" "$data_dir"
csv=$out/cost_curve.csv
echo "rows,model,mode,max_memory_mb,file_mb,train_rows_per_s,first_pass_or_load_s,total_s,peak_rss_mb,stream_peak_ring_mb" >"$csv"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
uptime | tee "$out/uptime_before.txt"
for rows in $sizes; do
  file=$data_dir/criteo_$rows.libsvm
  if [[ ! -f $file ]]; then
    need=$((rows * 300 * 12 / 10))  # about 280 bytes a row, 20% to spare
    avail=$(df -B1 --output=avail "$data_dir" | tail -1)
    if ((need > avail)); then
      echo "cost_curve_wide: skipping $rows rows: its file needs about $((need >> 20)) MiB, $((avail >> 20)) MiB free"
      continue
    fi
    start=$(date +%s.%N)
    "$build/apps/wide_train" --export="$file" "--data.train=synthetic:criteo?rows=$rows&features=$features&alpha=1.1&seed=1"
    echo "cost_curve_wide: wrote $file ($(du -m "$file" | cut -f1) MiB) in $(python3 -c "print(round($(date +%s.%N)-$start,1))") s"
  fi
  file_mb=$(python3 -c "import os; print(round(os.path.getsize('$file')/2**20, 1))")
  modes="in_memory"
  ((rows >= 2000000)) && modes="in_memory streamed"
  ((rows >= 20000000)) && modes="streamed"
  for mode in $modes; do
    for model in lr fm; do
      extra=()
      mb=0
      [[ $mode == streamed ]] && { mb=$stream_mb; extra=(--data.max_memory_mb="$mb"); }
      /usr/bin/time -v -o "$tmp/time.txt" "$build/apps/wide_train" --data.train="$file" --data.valid= --data.cache=false \
        --model.type=$model --model.features=$features --train.epochs=1 --train.threads="$threads" \
        --train.log_every=100000 "${extra[@]}" --output.dir="$tmp/run" >"$tmp/log.txt" 2>&1 ||
        { cat "$tmp/log.txt" "$tmp/time.txt" >&2; exit 1; }
      grep "stream:" "$tmp/log.txt" | tail -1 || true
      rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time.txt")
      python3 - "$tmp/run/summary.json" "$rows" "$model" "$mode" "$mb" "$file_mb" "$rss_kb" >>"$csv" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rows, model, mode, mb, file_mb, rss_kb = sys.argv[2:]
ring = s.get("stream_peak_ring_bytes")
print(f"{rows},{model},{mode},{mb},{file_mb},{s['train_samples_per_s']:.0f},{s['data_seconds']:.2f},{s['seconds']:.2f},"
      f"{int(rss_kb) / 1024:.1f},{'' if ring is None else round(ring / 2**20, 1)}")
PY
      tail -1 "$csv"
    done
  done
done
uptime | tee "$out/uptime_after.txt"
column -s, -t "$csv"
