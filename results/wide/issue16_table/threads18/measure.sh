#!/usr/bin/env bash
# Interleaved before/after of this session's wide threads and set-up work on issue 16's file:
# per round, for LR, FM k=16 and FFM k=4 at 1 and 2 threads, each binary's run back to back
# (one run per `flock /tmp/cpu.lock`), the table's command and settings (scripts/bench_wide_table.sh's
# `ours`: flow, AdaGrad, L2 1e-5, 5 epochs, LR lr 0.05, FM/FFM defaults). Prints one line per run:
# round model threads binary rows/s setup_s wall_s. Usage: measure.sh ROUNDS DATA_DIR BIN...
set -euo pipefail
rounds=$1 data=$2
shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  local bin=$1 model=$2 threads=$3 fmt=libsvm k=() lr=(--train.lr=0)
  [[ $model == ffm ]] && fmt=libffm && k=(--model.k=4)
  [[ $model == fm ]] && k=(--model.k=16)
  [[ $model == lr ]] && lr=(--train.lr=0.05)
  "$bin" --data.train="$data/main_train.$fmt" --data.valid="$data/main_test.$fmt" --model.type="$model" "${k[@]}" \
    "${lr[@]}" --train.l2=1e-5 --train.optimizer=adagrad --train.schema=flow --train.epochs=5 --train.patience=0 \
    --train.threads="$threads" --train.log_every=1000000000 2>&1 | tail -1
}
for r in $(seq "$rounds"); do
  for model in lr fm ffm; do
    for threads in 1 2; do
      for bin in "$@"; do
        start=$(date +%s.%N)
        summary=$(flock /tmp/cpu.lock bash -c "$(declare -f run); data=$data; run $bin $model $threads")
        end=$(date +%s.%N)
        python3 -c "import json, sys; d = json.loads(sys.argv[1]); print(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(d['train_samples_per_s']), round(d['setup_seconds'], 3), round(float(sys.argv[7]) - float(sys.argv[6]), 3))" \
          "$summary" "$r" "$model" "$threads" "$(basename "$bin")" "$start" "$end"
      done
    done
  done
done
