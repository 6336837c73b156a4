#!/usr/bin/env bash
# Issue 16's table re-measured in one command: wide_train LR, FM k=16 and FFM k=4 (flow schema,
# AdaGrad, no early stop) at 1, 2 and nproc threads on a Criteo-like synthetic file (ROWS rows,
# 39 fields, FEATURES features, written with `wide_train --export`; the last TEST_ROWS rows are
# the test set), medians of REPEATS interleaved runs: rows/s per epoch, the whole run's wall
# time (command to exit: load, set-up, EPOCHS epochs with the test set scored after each, no
# model file written), test AUC and logloss after the last epoch, and set-up (command to the
# first training step, the summary's setup_seconds) against one epoch; and the 2-core ceiling:
# two 1-thread runs side by side, their rows/s summed over one run alone ($OUT/ceiling.csv).
# Peer for LR, in the same run on the same files: LIBLINEAR (Debian liblinear-tools,
# single-threaded, so 1 thread is its best setting), -s 0 and -s 7 (primal and dual L2
# logistic regression: one objective, so equal test logloss), whole run = liblinear-train +
# liblinear-predict -b 1. No FM/FFM peer (libFM, LIBFFM, xLearn) is a Debian or npm package:
# their columns quote the issue's recorded figures, labelled as such.
# Settings: the issue's (lr 0.05, L2 1e-5) or wide_train's defaults (train.lr = 0: the model's
# default), per model, whichever ends with the lower logloss on a development split fixed in
# $OUT/dev.txt before any run (another seed); LIBLINEAR's C is chosen on the same split.
# Beside each rows/s, the memory bound: the bytes a training row moves with every touched model
# row from memory (wide_train's summary bytes_per_row) against STREAM's triad bandwidth measured
# at the same thread count ($OUT/bandwidth.csv); above 1 where hot rows stay in the caches.
# Per-epoch test AUC/logloss of FM and FFM under the defaults: $OUT/per_epoch.csv.
# Usage: scripts/bench_wide_table.sh [BUILD_DIR] (default build); ROWS, TEST_ROWS, FEATURES,
# EPOCHS, REPEATS, THREADS ("1 2 ..."), DATA_DIR, OUT override. Needs liblinear-train
# (scripts/setup.sh --bench). $OUT is a run directory (scripts/run_dir.sh: default
# out/bench_wide_table/<UTC time>/, starting as a copy of results/wide/issue16_table with its
# dev.txt); RECORD=1 replaces that claim folder with it. SMOKE=1: 4000 rows (1000 test), 1
# epoch, 1 repeat, 1 thread, data in DATA_DIR=data/issue16_smoke; not a measurement (RECORD=1 refused).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/wide_split.sh
source scripts/progress.sh
run_dir_start bench_wide_table "ROWS TEST_ROWS FEATURES EPOCHS REPEATS THREADS DATA_DIR" "$@"
if [[ ${SMOKE:-0} == 1 ]]; then
  ROWS=4000 TEST_ROWS=1000 EPOCHS=1 REPEATS=1 THREADS=1 DATA_DIR=${DATA_DIR:-data/issue16_smoke}
fi
build=${1:-build}
rows=${ROWS:-200000}
test_rows=${TEST_ROWS:-20000}
features=${FEATURES:-1900000}
epochs=${EPOCHS:-5}
repeats=${REPEATS:-3}
threads_list=${THREADS:-$(printf '%s\n' 1 2 "$(nproc)" | sort -nu | tr '\n' ' ')}
data=${DATA_DIR:-data/issue16}
out=$RUN_DIR
run_dir_claim results/wide/issue16_table "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v liblinear-train >/dev/null || { echo "bench_wide_table: liblinear-train missing: scripts/setup.sh --bench" >&2; exit 1; }
mkdir -p "$out" "$data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[[ -f $out/dev.txt ]] || { echo "bench_wide_table: $out/dev.txt (the development split) is missing" >&2; exit 1; }
dev_spec=$(grep -v '^#' "$out/dev.txt" | tr '\n' '&' | sed 's/&$//')
dev_test_rows=$(grep '^test_rows=' "$out/dev.txt" | cut -d= -f2)
dev_spec=$(echo "$dev_spec" | sed -E 's/(^|&)test_rows=[0-9]+//')

wide_make_split "$build/apps/wide_train" "$data" dev "$dev_spec" "$dev_test_rows"
wide_make_split "$build/apps/wide_train" "$data" main "rows=$rows&features=$features&alpha=1.1&seed=1" "$test_rows"

# ours NAME MODEL THREADS SETTING LOG: one wide_train run on $data/NAME_*; prints the CSV fields
# rows_per_s,setup_s,epoch_s,wall_s,test_auc,test_logloss,data_s and writes per-epoch lines.
ours() {
  local name=$1 model=$2 threads=$3 setting=$4 log=$5 fmt=libsvm k=()
  [[ $model == ffm ]] && fmt=libffm
  [[ $model == fm ]] && k=(--model.k=16)
  [[ $model == ffm ]] && k=(--model.k=4)
  local lr=(--train.lr=0.05)
  [[ $setting == defaults ]] && lr=(--train.lr=0)
  local start end
  start=$(date +%s.%N)
  "$build/apps/wide_train" --output.dir= --data.train="$data/${name}_train.$fmt" --data.valid="$data/${name}_test.$fmt" \
    --model.type="$model" "${k[@]}" "${lr[@]}" --train.l2=1e-5 --train.optimizer=adagrad --train.schema=flow \
    --train.epochs="${run_epochs:-$epochs}" --train.patience=0 --train.threads="$threads" --train.log_every=1000000000 >"$log" 2>&1 ||
    { cat "$log" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 - "$log" "$start" "$end" <<'PY'
import json, re, sys
log, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
lines = open(log).read().splitlines()
s = json.loads(lines[-1])
epochs = [re.search(r"epoch (\d+) train logloss (\S+) valid logloss (\S+) auc (\S+) \((\S+) s\)", l) for l in lines]
epochs = [m.groups() for m in epochs if m]
with open(log + ".epochs", "w") as f:
    for e in epochs: f.write(",".join(e) + "\n")
last = epochs[-1]
epoch_s = sum(float(e[4]) for e in epochs) / len(epochs)
print(f"{s['train_samples_per_s']:.0f},{s['setup_seconds']:.3f},{epoch_s:.3f},{end - start:.3f},{last[3]},{last[2]},{s['data_seconds']:.3f},{s['bytes_per_row']:.0f}")
PY
}

# liblinear NAME SOLVER C: train on $data/NAME_train.libsvm, score NAME_test; prints
# rows_per_s (training rows / training seconds),train_s,wall_s,test_auc,test_logloss.
liblinear() {
  local name=$1 solver=$2 c=$3 start mid end
  start=$(date +%s.%N)
  liblinear-train -q -s "$solver" -c "$c" -B 1 "$data/${name}_train.libsvm" "$tmp/ll.model"
  mid=$(date +%s.%N)
  liblinear-predict -q -b 1 "$data/${name}_test.libsvm" "$tmp/ll.model" "$tmp/ll.pred"
  end=$(date +%s.%N)
  python3 - "$tmp/ll.pred" "$data/${name}_test.libsvm" "$start" "$mid" "$end" <<'PY'
import math, sys
pred, test = open(sys.argv[1]).read().split("\n"), sys.argv[2]
start, mid, end = map(float, sys.argv[3:6])
col = pred[0].split()[1:].index("1") + 1  # probability column of label 1
p = [min(max(float(l.split()[col]), 1e-15), 1 - 1e-15) for l in pred[1:] if l.strip()]
y = [1 if float(l.split()[0]) > 0 else 0 for l in open(test) if l.strip()]
logloss = -sum(math.log(q) if t else math.log(1 - q) for q, t in zip(p, y)) / len(y)
pairs = sorted(zip(p, y)); pos = sum(y); neg = len(y) - pos; rank_sum = 0.0; i = 0
while i < len(pairs):
    j = i
    while j < len(pairs) and pairs[j][0] == pairs[i][0]: j += 1
    rank_sum += sum(t for _, t in pairs[i:j]) * (i + j + 1) / 2.0
    i = j
train_rows = sum(1 for l in open(test.replace("_test.", "_train.")) if l.strip())
print(f"{train_rows / (mid - start):.0f},{mid - start:.3f},{end - start:.3f},{(rank_sum - pos * (pos + 1) / 2) / (pos * neg):.6f},{logloss:.6f}")
PY
}

uptime | tee "$out/uptime_before.txt"
# 1. The settings, on the development split: each model's final logloss under both settings, at
# one thread; LIBLINEAR's C by the same measure.
echo "model,setting,test_auc,test_logloss" >"$out/dev_choice.csv"
declare -A setting
for model in lr fm ffm; do
  best=""
  for s in issue defaults; do
    fields=$(ours dev "$model" 1 "$s" "$tmp/dev.log")
    IFS=, read -r _ _ _ _ auc loss _ <<<"$fields"
    echo "$model,$s,$auc,$loss" >>"$out/dev_choice.csv"
    if [[ -z $best ]] || python3 -c "import sys; sys.exit(0 if $loss < $best else 1)"; then best=$loss; setting[$model]=$s; fi
  done
done
best=""
for c in 0.1 1 10; do
  fields=$(liblinear dev 0 "$c")
  IFS=, read -r _ _ _ auc loss <<<"$fields"
  echo "liblinear_c$c,s0,$auc,$loss" >>"$out/dev_choice.csv"
  if [[ -z $best ]] || python3 -c "import sys; sys.exit(0 if $loss < $best else 1)"; then best=$loss; ll_c=$c; fi
done
echo "bench_wide_table: settings lr=${setting[lr]} fm=${setting[fm]} ffm=${setting[ffm]}, liblinear C=$ll_c"
column -s, -t "$out/dev_choice.csv"

# 2. The table's runs. An untimed first run of each model writes the binary caches
# (FILE.skewbin); the timed runs load from them, and the text parse's time is kept apart.
echo "model,text_parse_s" >"$out/text_parse.csv"
for model in lr ffm; do
  fmt=libsvm
  [[ $model == ffm ]] && fmt=libffm
  rm -f "$data/main_train.$fmt.skewbin" "$data/main_test.$fmt.skewbin"
  fields=$(run_epochs=1 ours main "$model" 1 "${setting[$model]}" "$tmp/warm.log")
  IFS=, read -r _ _ _ _ _ _ parse_s _ <<<"$fields"
  echo "$model($fmt),$parse_s" >>"$out/text_parse.csv"
done
# The memory bound beside each rows/s: STREAM's triad bandwidth at each thread count (wide_bench
# measures it before its own tiny run), against the bytes a training row moves (the summary's
# bytes_per_row: every touched row from memory).
echo "threads,triad_GBps" >"$out/bandwidth.csv"
for threads in $threads_list; do
  triad=$("$build/apps/wide_bench" --bench.data="synthetic:criteo?rows=2000&features=5000&alpha=1.1&seed=1" \
    --bench.models=lr --bench.repeats=1 --bench.threads="$threads" 2>/dev/null | tail -1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["triad_GBps"])')
  echo "$threads,$triad" >>"$out/bandwidth.csv"
done
echo "rep,tool,model,threads,setting,rows_per_s,setup_s,epoch_s,wall_s,test_auc,test_logloss,load_s,bytes_per_row" >"$out/runs.csv"
echo "model,threads,rep,setting,epoch,train_logloss,test_logloss,test_auc,epoch_s" >"$out/per_epoch.csv"
echo "rep,load_1min" >"$out/load.csv"
# Per repeat: 3 models at each thread count, 3 side-by-side pairs, 2 LIBLINEAR solvers.
progress_begin $((repeats * (3 * $(wc -w <<<"$threads_list") + 3 + 2)))
for rep in $(seq 1 "$repeats"); do
  echo "$rep,$(cut -d' ' -f1 /proc/loadavg)" >>"$out/load.csv"
  for threads in $threads_list; do
    for model in lr fm ffm; do
      progress_next "wide_train $model at $threads thread(s), repeat $rep"
      fields=$(ours main "$model" "$threads" "${setting[$model]}" "$tmp/run.log")
      echo "$rep,wide_train,$model,$threads,${setting[$model]},$fields" | tee -a "$out/runs.csv"
      sed "s/^/$model,$threads,$rep,${setting[$model]},/" "$tmp/run.log.epochs" >>"$out/per_epoch.csv"
    done
  done
  # The machine's own ceiling for 2 threads: two 1-thread runs side by side share what the cores
  # share (caches, memory bandwidth, the VM's scheduling) and nothing else; their rows/s summed,
  # over one run alone, bounds what any 2-thread schedule of the same work can reach here.
  for model in lr fm ffm; do
    progress_next "wide_train $model, two 1-thread runs side by side, repeat $rep"
    ours main "$model" 1 "${setting[$model]}" "$tmp/side_a.log" >"$tmp/side_a.csv" &
    side_a=$!
    ours main "$model" 1 "${setting[$model]}" "$tmp/side_b.log" >"$tmp/side_b.csv" &
    side_b=$!
    wait "$side_a" && wait "$side_b" || { echo "bench_wide_table: a side-by-side run failed" >&2; exit 1; }
    for side in a b; do
      echo "$rep,wide_train_side_by_side,$model,1,${setting[$model]},$(cat "$tmp/side_$side.csv")" | tee -a "$out/runs.csv"
    done
  done
  for solver in 0 7; do
    progress_next "liblinear -s $solver, repeat $rep"
    fields=$(liblinear main "$solver" "$ll_c")
    IFS=, read -r rps train_s wall auc loss <<<"$fields"
    echo "$rep,liblinear_s$solver,lr,1,C=$ll_c,$rps,,$train_s,$wall,$auc,$loss,," | tee -a "$out/runs.csv"
  done
done
# FM and FFM per epoch under the defaults, when the development split chose the issue's setting.
for model in fm ffm; do
  [[ ${setting[$model]} == defaults ]] && continue
  ours main "$model" 1 defaults "$tmp/run.log" >/dev/null
  sed "s/^/$model,1,1,defaults,/" "$tmp/run.log.epochs" >>"$out/per_epoch.csv"
done
uptime | tee "$out/uptime_after.txt"
python3 scripts/bench_wide_table.py "$out"
run_dir_finish
