#!/usr/bin/env bash
# wide_train against its public peers (issue 36): xLearn (LR, FM, FFM), LIBFFM (FFM), libFM (FM)
# and LIBLINEAR (LR), built from their sources by scripts/peers/build.sh into PEERS_BIN (default
# /work/peers/bin). On the held-out split of a claim folder's splits.txt (a Criteo-like export,
# committed before any run; results/wide/peers: 200k rows, results/wide/peers_1m: 1M): per tool,
# model and thread count (1 and 2 where the tool has threads), medians of REPEATS interleaved
# runs of rows/s per epoch (as the tool reports its
# epoch times: wide_train's summary, xLearn's and LIBFFM's per-epoch lines; libFM and LIBLINEAR
# report none), whole-run seconds (the training command, start to exit: load, set-up, epochs;
# libFM also scores the test file after each epoch, which it cannot be told not to), and test
# AUC/logloss of the final model scored by each tool's own predictor and one metric code
# (scripts/bench_wide_peers.py). Each tool's learning rate (LIBLINEAR: C) is the one of its grid
# in splits.txt with the lowest final logloss on the development split, chosen at 1 thread by
# the same script before the held-out runs ($OUT/dev_choice.csv). Load (1-minute average) before
# each run and the CPU model go in the run folder.
# Usage: scripts/bench_wide_peers.sh [BUILD_DIR] (default build); CLAIM (the claim folder whose
# splits.txt is run: results/wide/peers, the 200k-row table, or results/wide/peers_1m, the
# 1M-row one), REPEATS (3), THREADS ("1 2"), MODELS ("lr fm ffm"), DATA_DIR (data/ + the claim
# folder's name), PEERS_BIN, OUT override. $OUT is a run directory (scripts/run_dir.sh: default
# out/bench_wide_peers/<UTC time>/, a copy of the claim folder); RECORD=1 replaces the claim
# folder with it. SMOKE=1: 4000 rows (1000 test), dev 3000 (1000), 1 epoch, 1 repeat, 1 thread,
# data in data/peers_smoke; not a measurement (RECORD=1 refused).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/wide_split.sh
run_dir_start bench_wide_peers "CLAIM REPEATS THREADS MODELS DATA_DIR PEERS_BIN" "$@"
build=${1:-build}
peers=$(realpath "${PEERS_BIN:-/work/peers/bin}")
claim=${CLAIM:-results/wide/peers}
claim=${claim%/}
[[ $claim == results/wide/* && -f $claim/splits.txt ]] ||
  { echo "bench_wide_peers: CLAIM=$claim is not a claim folder under results/wide/ with a splits.txt" >&2; exit 1; }
out=$RUN_DIR
run_dir_claim "$claim" "$out"
[[ -f $out/splits.txt ]] || { echo "bench_wide_peers: $out/splits.txt (the fixed splits) is missing" >&2; exit 1; }
setting() { grep "^$1=" "$out/splits.txt" | cut -d= -f2-; }
main_spec=$(setting main) main_test=$(setting main_test_rows) dev_spec=$(setting dev) dev_test=$(setting dev_test_rows)
epochs=$(setting epochs) l2=$(setting l2) fm_k=$(setting fm_k) ffm_k=$(setting ffm_k)
repeats=${REPEATS:-3} threads_list=${THREADS:-1 2} models=${MODELS:-lr fm ffm} data=${DATA_DIR:-data/${claim##*/}}
if [[ ${SMOKE:-0} == 1 ]]; then
  main_spec="rows=4000&features=20000&alpha=1.1&seed=1" main_test=1000
  dev_spec="rows=3000&features=20000&alpha=1.1&seed=2" dev_test=1000
  epochs=1 repeats=1 threads_list=1 data=${DATA_DIR:-data/peers_smoke}
fi
for tool in xlearn_train xlearn_predict ffm-train ffm-predict libFM liblinear-train liblinear-predict; do
  [[ -x $peers/$tool ]] || { echo "bench_wide_peers: $peers/$tool missing: scripts/peers/build.sh SRC_DIR $peers" >&2; exit 1; }
done
# xLearn names its log after $USER and fails without it.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 USER=${USER:-$(id -un)}
mkdir -p "$out" "$data"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
metrics=scripts/bench_wide_peers.py

wide_make_split "$build/apps/wide_train" "$data" dev "$dev_spec" "$dev_test"
wide_make_split "$build/apps/wide_train" "$data" main "$main_spec" "$main_test"

# The tools. Each: NAME MODEL THREADS LR LOG; trains on $data/NAME_train, writes test scores to
# $tmp/scores (one probability per test row) and LOG; the caller times the training command.
fmt_of() { [[ $1 == ffm ]] && echo libffm || echo libsvm; }
k_of() { case $1 in fm) echo "$fm_k" ;; ffm) echo "$ffm_k" ;; *) echo 1 ;; esac; }  # LR: unused
train_wide() {
  local name=$1 model=$2 threads=$3 lr=$4 log=$5 fmt
  fmt=$(fmt_of "$model")
  timed "$log" "$build/apps/wide_train" --data.train="$data/${name}_train.$fmt" --data.valid= --model.type="$model" \
    --model.k="$(k_of "$model")" --train.lr="$lr" --train.l2="$l2" --train.optimizer=adagrad --train.schema=flow \
    --train.epochs="$epochs" --train.patience=0 --train.threads="$threads" --train.log_every=1000000000 \
    --output.model="$tmp/wide.safetensors"
  "$build/apps/wide_train" --predict --predict.model="$tmp/wide.safetensors" --predict.data="$data/${name}_test.$fmt" \
    --predict.output="$tmp/scores" >/dev/null 2>&1
}
train_xlearn() {
  local name=$1 model=$2 threads=$3 lr=$4 log=$5 fmt kind
  fmt=$(fmt_of "$model")
  case $model in lr) kind=0 ;; fm) kind=1 ;; ffm) kind=2 ;; esac
  timed "$log" "$peers/xlearn_train" "$data/${name}_train.$fmt" -s "$kind" -p adagrad -r "$lr" -b "$l2" \
    -k "$(k_of "$model")" -e "$epochs" -nthread "$threads" --dis-es -m "$tmp/xl.model"
  "$peers/xlearn_predict" "$data/${name}_test.$fmt" "$tmp/xl.model" -o "$tmp/scores" --sigmoid -nthread 1 >/dev/null 2>&1
}
# LIBFFM reads the libffm files through links of its own, from the data folder: it keeps its
# binary cache at the file's base name + .bin in the working directory, the name xLearn gives its
# (different) cache beside the file.
train_libffm() {
  local name=$1 threads=$3 lr=$4 log=$5 part
  for part in train test; do ln -sf "${name}_$part.libffm" "$data/${name}_$part.for-libffm"; done
  (
    cd "$data"
    timed "$log" "$peers/ffm-train" -l "$l2" -k "$ffm_k" -t "$epochs" -r "$lr" -s "$threads" \
      "${name}_train.for-libffm" "$tmp/ffm.model"
    "$peers/ffm-predict" "${name}_test.for-libffm" "$tmp/ffm.model" "$tmp/scores" >/dev/null 2>&1
  )
}
train_libfm() {
  local name=$1 lr=$4 log=$5
  timed "$log" "$peers/libFM" -task c -method sgd -train "$data/${name}_train.libsvm" -test "$data/${name}_test.libsvm" \
    -dim "1,1,$fm_k" -iter "$epochs" -learn_rate "$lr" -regular "0,$l2,$l2" -out "$tmp/scores"
}
train_liblinear() {
  local name=$1 c=$4 log=$5
  timed "$log" "$peers/liblinear-train" -q -s 0 -c "$c" -B 1 "$data/${name}_train.libsvm" "$tmp/ll.model"
  "$peers/liblinear-predict" -q -b 1 "$data/${name}_test.libsvm" "$tmp/ll.model" "$tmp/ll.pred"
  python3 "$metrics" liblinear-scores "$tmp/ll.pred" >"$tmp/scores"
}
# timed LOG COMMAND...: runs it with its output in LOG; its wall seconds into $tmp/wall.
timed() {
  local log=$1 start end
  shift
  start=$(date +%s.%N)
  "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "bench_wide_peers: failed: $*" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.3f}')" >"$tmp/wall"
}
# run_tool TOOL NAME MODEL THREADS LR: the CSV fields rows_per_s_epoch,wall_s,test_auc,test_logloss.
run_tool() {
  local tool=$1 name=$2 model=$3 threads=$4 lr=$5
  rm -f "$tmp/scores"
  "train_$tool" "$name" "$model" "$threads" "$lr" "$tmp/log"
  python3 "$metrics" row "$tool" "$tmp/log" "$(cat "$tmp/wall")" "$tmp/scores" "$data/${name}_test.$(fmt_of "$model")" \
    "$(($(wc -l <"$data/${name}_train.libsvm")))" "$epochs"
}
# The tools of each model, and the thread counts each has (libFM and LIBLINEAR: one).
tools_of() { case $1 in lr) echo "wide xlearn liblinear" ;; fm) echo "wide xlearn libfm" ;; ffm) echo "wide xlearn libffm" ;; esac; }
threaded() { [[ $1 == wide || $1 == xlearn || $1 == libffm ]]; }

{
  uptime
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
  echo "simd: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512bw|avx512vl)$' | tr '\n' ' ')"
  cat "$peers/build-info.txt" 2>/dev/null || true
} | tee "$out/machine.txt"

# 1. Learning rates on the development split, 1 thread, final-epoch test logloss.
echo "tool,model,lr,rows_per_s_epoch,wall_s,test_auc,test_logloss" >"$out/dev_choice.csv"
declare -A best_lr
for model in $models; do
  for tool in $(tools_of "$model"); do
    grid=$(setting "grid_${tool}_$model")
    [[ ${SMOKE:-0} == 1 ]] && grid=${grid%% *}
    best=""
    for lr in $grid; do
      fields=$(run_tool "$tool" dev "$model" 1 "$lr")
      echo "$tool,$model,$lr,$fields" | tee -a "$out/dev_choice.csv"
      loss=${fields##*,}
      if [[ -z $best ]] || python3 -c "import sys; sys.exit(0 if $loss < $best else 1)"; then best=$loss best_lr[$tool.$model]=$lr; fi
    done
  done
done

# 2. The held-out runs, interleaved: every tool, model and thread count once per repeat. An
# untimed first run of each tool and model writes the caches the tools keep beside a text file
# (wide_train's FILE.skewbin, xLearn's and LIBFFM's FILE.bin): every timed run starts from them
# alike. One epoch is enough to write them.
table_epochs=$epochs epochs=1
for model in $models; do
  for tool in wide xlearn libffm; do
    [[ $(tools_of "$model") == *$tool* ]] && run_tool "$tool" main "$model" 1 "${best_lr[$tool.$model]}" >/dev/null
  done
done
epochs=$table_epochs
echo "rep,tool,model,threads,lr,load_1min,rows_per_s_epoch,wall_s,test_auc,test_logloss" >"$out/runs.csv"
for rep in $(seq 1 "$repeats"); do
  for threads in $threads_list; do
    for model in $models; do
      for tool in $(tools_of "$model"); do
        [[ $threads == 1 ]] || threaded "$tool" || continue
        load=$(cut -d' ' -f1 /proc/loadavg)
        fields=$(run_tool "$tool" main "$model" "$threads" "${best_lr[$tool.$model]}")
        echo "$rep,$tool,$model,$threads,${best_lr[$tool.$model]},$load,$fields" | tee -a "$out/runs.csv"
      done
    done
  done
done
uptime | tee -a "$out/machine.txt"
python3 "$metrics" table "$out"
run_dir_finish
