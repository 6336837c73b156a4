#!/usr/bin/env bash
# Benchmarks for wide_train (results in the claim folders under results/wide/):
#   1. wide_bench: classical vs flow in one run on synthetic Criteo-like data (1M rows, 2^22
#      features; LR and FM k=16), samples/s, nonzeros/s, flow/classical ratio, and beside each
#      figure the bytes a row moves, the rows/s bound those bytes allow at the triad bandwidth
#      measured in the same run (at the run's threads) and the fraction achieved
#      -> fm_criteo/bench_criteo_fm.csv, lr_criteo/bench_criteo_lr.csv (the FM and LR rows of
#      the one run's CSV), summarised after the run
#   2. on the SpamAssassin split (scripts/fetch_data.sh spam): the same wide_bench comparison on
#      its training file (4810 rows, about 750 nonzeros each, 2^20 hashed features; batch 512 so
#      an epoch is several timed steps after the untimed first) -> spam_throughput/bench_spam.csv;
#      and time-to-AUC for LR: wide_train (classical and flow, whole run) vs liblinear-train (its training,
#      file reading included; L2-regularised logistic regression, -s 0; setup.sh --bench installs it)
#      -> spam_time_to_auc/spam_liblinear.csv
# Then scripts/plot_results.py redraws each folder's plot (when matplotlib is installed).
# The folders go to a run directory (scripts/run_dir.sh: out/bench_wide/<UTC time>/, or OUT);
# RECORD=1 replaces the claim folders of the parts run with them.
# Usage: scripts/bench_wide.sh [BUILD_DIR] (default build); ROWS=... THREADS=... override;
# PARTS=criteo or PARTS=spam runs one part only; SMOKE=1: 20000 rows, not a measurement
# (RECORD=1 refused).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
run_dir_start bench_wide "ROWS THREADS PARTS" "$@"
build=${1:-build}
rows=${ROWS:-1000000}
[[ ${SMOKE:-0} == 1 ]] && rows=20000
threads=${THREADS:-2}
parts=${PARTS:-criteo,spam}
out=$RUN_DIR
claims=()
[[ $parts == *criteo* ]] && claims+=(fm_criteo lr_criteo)
if [[ $parts == *spam* ]]; then
  claims+=(spam_throughput spam_time_to_auc)
  if [[ ${RECORD:-0} == 1 && ! (-f data/spam/train.libsvm && -x "$(command -v liblinear-train)") ]]; then
    run_dir_fail "RECORD=1 with the spam part, which cannot run: scripts/fetch_data.sh spam and liblinear-train, or PARTS=criteo"
  fi
fi
for claim in "${claims[@]}"; do run_dir_claim "results/wide/$claim" "$out/$claim"; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ $parts == *criteo* ]]; then
  csv=$(mktemp)
  "$build/apps/wide_bench" --bench.data="synthetic:criteo?rows=$rows&features=4194304&alpha=1.1&seed=1" \
    --bench.models=lr,fm --bench.k=16 --bench.threads="$threads" --bench.csv="$csv" 2>&1
  for model in fm lr; do  # one claim folder per model, the same run's rows
    { head -n 1 "$csv"; grep "^$model," "$csv"; } >"$out/${model}_criteo/bench_criteo_$model.csv"
  done
  echo "bench_wide: rows/s beside the bandwidth bound (bytes/row at the measured triad GB/s)"
  awk -F, 'NR == 1 { for (c = 1; c <= NF; ++c) col[$c] = c; next }
    { printf "  %-3s %-9s %-10s %10.0f rows/s  %7.0f B/row at %5.1f GB/s -> bound %10.0f rows/s, %.3f of it\n",
        $col["model"], $col["schema"], $col["ids"], $col["samples_per_s"], $col["bytes_per_row"],
        $col["triad_GBps"], $col["bound_samples_per_s"], $col["bound_fraction"] }' "$csv"
  rm -f "$csv"
fi

if [[ $parts != *spam* ]]; then
  :
elif [[ -f data/spam/train.libsvm && -x "$(command -v liblinear-train)" ]]; then
  "$build/apps/wide_bench" --bench.data=data/spam/train.libsvm --bench.models=lr,fm --bench.k=16 \
    --bench.batch_size=512 --bench.repeats=5 --bench.threads="$threads" --bench.csv="$out/spam_throughput/bench_spam.csv" 2>&1
  tmp=$(mktemp -d)
  echo "tool,schema,seconds,test_auc,seconds_to_liblinear_auc" > "$out/spam_time_to_auc/spam_liblinear.csv"
  # liblinear's seconds are its training alone (liblinear-train, L2-regularised logistic
  # regression, -s 0); scoring the test file follows, untimed, as wide_train's validation is
  # outside its train_s.
  start=$(date +%s.%N)
  liblinear-train -q -s 0 -c 1 data/spam/train.libsvm "$tmp/ll.model"
  end=$(date +%s.%N)
  liblinear-predict -q -b 1 data/spam/test.libsvm "$tmp/ll.model" "$tmp/ll.pred"
  auc=$(python3 - "$tmp/ll.pred" data/spam/test.libsvm <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
col = lines[0].split()[1:].index("1") + 1          # probability column of label 1
scores = [float(l.split()[col]) for l in lines[1:] if l.strip()]
labels = [1 if float(l.split()[0]) > 0 else 0 for l in open(sys.argv[2]) if l.strip()]
pairs = sorted(zip(scores, labels))
pos = sum(labels); neg = len(labels) - pos; rank_sum = 0.0; i = 0
while i < len(pairs):
    j = i
    while j < len(pairs) and pairs[j][0] == pairs[i][0]: j += 1
    rank_sum += sum(l for _, l in pairs[i:j]) * (i + j + 1) / 2.0
    i = j
print((rank_sum - pos * (pos + 1) / 2) / (pos * neg))
PY
)
  ll_seconds=$(python3 -c "print(round($end-$start,3))")
  echo "liblinear,s0_c1,$ll_seconds,$auc,$ll_seconds" >> "$out/spam_time_to_auc/spam_liblinear.csv"
  # wide_train: total time and the first epoch (elapsed since start, parsing included) whose
  # test AUC reaches liblinear's.
  for schema in classical flow; do
    start=$(date +%s.%N)
    "$build/apps/wide_train" --data.train=data/spam/train.libsvm --data.valid=data/spam/test.libsvm \
      --data.cache=false --model.type=lr --train.schema=$schema --train.optimizer=adagrad --train.lr=0.1 \
      --train.epochs=10 --train.patience=2 --train.batch_size=64 --train.threads="$threads" \
      --output.dir="$tmp/$schema" > "$tmp/$schema.log" 2>&1
    end=$(date +%s.%N)
    best=$(tail -1 "$tmp/$schema.log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["valid_auc"])')
    reach=$(python3 - "$tmp/$schema/metrics.jsonl" "$auc" <<'PY'
import json, sys
hits = [r["elapsed_s"] for r in map(json.loads, open(sys.argv[1])) if "valid_auc" in r and r["valid_auc"] >= float(sys.argv[2])]
print(round(hits[0], 3) if hits else "never")
PY
)
    echo "wide_train,$schema,$(python3 -c "print(round($end-$start,3))"),$best,$reach" >> "$out/spam_time_to_auc/spam_liblinear.csv"
  done
  cat "$out/spam_time_to_auc/spam_liblinear.csv"
  rm -rf "$tmp"
else
  echo "bench_wide: data/spam missing (scripts/fetch_data.sh spam) or liblinear-train not installed; skipping the spam part"
fi
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  if [[ $parts == *criteo* ]]; then
    for model in fm lr; do /usr/bin/python3 scripts/plot_results.py wide-criteo "$out/${model}_criteo"; done
  fi
  if [[ -s "$out/spam_time_to_auc/spam_liblinear.csv" && $parts == *spam* ]]; then
    /usr/bin/python3 scripts/plot_results.py wide-spam "$out/spam_throughput"
    /usr/bin/python3 scripts/plot_results.py wide-tta "$out/spam_time_to_auc"
  fi
fi
run_dir_finish
