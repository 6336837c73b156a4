#!/usr/bin/env bash
# wide_train's cost curve: training rows/s and peak resident memory at 200k, 2M and 20M rows of
# synthetic Criteo-like data (39 fields, 2^22 features, as scripts/bench_wide.sh), LR and FM,
# one epoch each, written to libsvm files first (wide_train --export, in $GEN_JOBS row ranges at
# once, joined: row r depends only on the seed and r) so that every size is read as a file. Each
# size is loaded whole (parsed, data.cache off) unless that would not fit the available memory
# (about 1 KB a row, from the 8M run; a whole run that fails anyway is recorded as failed); from
# 2M rows on it is also streamed, first, with data.max_memory_mb = $STREAM_MB and data.cache on:
# the size's cache is deleted first, so the LR run's first pass parses the text and writes
# FILE.skewbin, and the FM run reads it from its first pass on (the `source` column). A size whose files would not fit the free disk (df, with 20% to
# spare) is skipped with a message. Writes cost_curve.csv (and
# generate_seconds.txt); peak RSS from /usr/bin/time -v (scripts/setup.sh --bench installs it).
# The data files (text and cache) stay in $DATA_DIR (ignored by git): delete the large ones.
# Usage: scripts/cost_curve_wide.sh [BUILD_DIR] (default build); SIZES="200000 2000000 20000000",
# THREADS=2, STREAM_MB=1024, GEN_JOBS=$(nproc), DATA_DIR=data/cost_curve override. The CSV and
# its notes go to a run directory (scripts/run_dir.sh: out/cost_curve_wide/<UTC time>/, or OUT);
# RECORD=1 replaces the claim folder with it. SMOKE=1: SIZES=20000, not a measurement (RECORD=1
# refused).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
run_dir_start cost_curve_wide "SIZES THREADS STREAM_MB GEN_JOBS DATA_DIR" "$@"
[[ ${SMOKE:-0} == 1 ]] && SIZES=20000
build=${1:-build}
sizes=${SIZES:-200000 2000000 20000000}
threads=${THREADS:-2}
stream_mb=${STREAM_MB:-1024}
gen_jobs=${GEN_JOBS:-$(nproc)}
data_dir=${DATA_DIR:-data/cost_curve}
out=$RUN_DIR
run_dir_claim results/wide/cost_curve "$out"
features=4194304
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -x /usr/bin/time ]] || { echo "cost_curve_wide: /usr/bin/time is missing: run scripts/setup.sh --bench" >&2; exit 1; }
mkdir -p "$out" "$data_dir"
csv=$out/cost_curve.csv
echo "rows,model,mode,source,max_memory_mb,file_mb,train_rows_per_s,first_pass_or_load_s,total_s,peak_rss_mb,stream_peak_ring_mb" >"$csv"
echo "rows seconds_to_write_the_libsvm_file (GEN_JOBS=$gen_jobs)" >"$out/generate_seconds.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
uptime | tee "$out/uptime_before.txt"
for rows in $sizes; do
  file=$data_dir/criteo_$rows.libsvm
  if [[ ! -f $file ]]; then
    # The text (about 300 bytes a row), its cache and the cache's temporaries (about 1.3x the
    # text each), 20% to spare.
    need=$((rows * 300 * 36 / 10 * 12 / 10))
    avail=$(df -B1 --output=avail "$data_dir" | tail -1)
    if ((need > avail)); then
      echo "cost_curve_wide: skipping $rows rows: its files need about $((need >> 20)) MiB, $((avail >> 20)) MiB free"
      continue
    fi
    start=$(date +%s.%N)
    pids=()
    for ((j = 0; j < gen_jobs; j++)); do
      first=$((rows * j / gen_jobs)) count=$((rows * (j + 1) / gen_jobs - rows * j / gen_jobs))
      "$build/apps/wide_train" --export="$file.part$j" \
        "--data.train=synthetic:criteo?rows=$count&features=$features&alpha=1.1&seed=1&first_row=$first" >/dev/null &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    rm -f "$file.tmp"
    for ((j = 0; j < gen_jobs; j++)); do cat "$file.part$j" >>"$file.tmp" && rm "$file.part$j"; done
    mv "$file.tmp" "$file"
    seconds=$(python3 -c "print(round($(date +%s.%N)-$start,1))")
    echo "$rows $seconds" >>"$out/generate_seconds.txt"
    echo "cost_curve_wide: wrote $file ($(du -m "$file" | cut -f1) MiB) in $seconds s"
  fi
  file_mb=$(python3 -c "import os; print(round(os.path.getsize('$file')/2**20, 1))")
  modes=""
  if ((rows >= 2000000)); then  # streamed first: the whole load of a large size may not fit
    modes="streamed"
    rm -f "$file.skewbin"  # the LR run's first pass writes it, the FM run reads it
  fi
  mem_avail=$(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024))
  if ((rows * 1000 < mem_avail)); then
    modes="$modes in_memory"
  else
    echo "cost_curve_wide: $rows rows are not loaded whole: about $((rows * 1000 >> 20)) MiB, $((mem_avail >> 20)) MiB available"
  fi
  for mode in $modes; do
    for model in lr fm; do
      extra=(--data.cache=false)
      mb=0
      [[ $mode == streamed ]] && { mb=$stream_mb; extra=(--data.max_memory_mb="$mb" --data.cache=true); }
      /usr/bin/time -v -o "$tmp/time.txt" "$build/apps/wide_train" --data.train="$file" --data.valid= \
        --model.type=$model --model.features=$features --train.epochs=1 --train.threads="$threads" \
        --train.log_every=100000 "${extra[@]}" --output.dir="$tmp/run" >"$tmp/log.txt" 2>&1 || {
        # A whole load killed for memory is a result: recorded, and the curve goes on.
        rc=$?
        tail -n 5 "$tmp/log.txt" "$tmp/time.txt" >&2
        echo "$rows,$model,$mode,failed_rc_$rc,$mb,$file_mb,,,,$(awk -F': ' '/Maximum resident/ {printf "%.1f", $2 / 1024}' "$tmp/time.txt")," >>"$csv"
        continue
      }
      source=text
      grep -q "writing its binary cache" "$tmp/log.txt" && source=text_writes_cache
      grep -q "over its binary cache" "$tmp/log.txt" && source=cache
      grep "stream:" "$tmp/log.txt" | tail -1 || true
      rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time.txt")
      python3 - "$tmp/run/summary.json" "$rows" "$model" "$mode" "$source" "$mb" "$file_mb" "$rss_kb" >>"$csv" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rows, model, mode, source, mb, file_mb, rss_kb = sys.argv[2:]
ring = s.get("stream_peak_ring_bytes")
print(f"{rows},{model},{mode},{source},{mb},{file_mb},{s['train_samples_per_s']:.0f},{s['data_seconds']:.2f},{s['seconds']:.2f},"
      f"{int(rss_kb) / 1024:.1f},{'' if ring is None else round(ring / 2**20, 1)}")
PY
      tail -1 "$csv"
    done
  done
done
uptime | tee "$out/uptime_after.txt"
column -s, -t "$csv"
run_dir_finish
