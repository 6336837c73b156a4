#!/usr/bin/env bash
# Set-up and whole-run wall time, main's binary (base) against this branch's (new), interleaved
# (the order alternates by round), each binary on its own copy of data/issue16, the files read
# into the page cache before each run; one run per flock /tmp/cpu.lock.
# Usage: measure.sh ROUNDS OUT.csv [CONFIGS...] (default: lr1 lr2 fm1 ffm1)
set -euo pipefail
rounds=$1 out=$2; shift 2
configs=${*:-lr1 lr2 fm1 ffm1}
new_bin=/work/wt/setup18/build/apps/wide_train
echo "round,config,binary,setup_s,startup_s,data_s,model_s,trainer_s,wall_s,valid_logloss,load1" > "$out"
run() {  # run ROUND CONFIG BINARY
  local bin data fmt=libsvm model threads k=() lr=(--train.lr=0) epochs=5
  if [[ $3 == base ]]; then bin=/tmp/setup18_base/wide_train data=/tmp/setup18data_base; else bin=$new_bin data=/tmp/setup18data; fi
  case $2 in
    lr1) model=lr threads=1 lr=(--train.lr=0.05) ;;
    lr2) model=lr threads=2 lr=(--train.lr=0.05) ;;
    fm1) model=fm threads=1 k=(--model.k=16) ;;
    ffm1) model=ffm threads=1 k=(--model.k=4) fmt=libffm ;;
  esac
  cat "$data/main_train.$fmt" "$data/main_train.$fmt.skewbin" "$data/main_test.$fmt" "$data/main_test.$fmt.skewbin" >/dev/null
  local load1 log
  load1=$(cut -d' ' -f1 /proc/loadavg)
  log=$(flock /tmp/cpu.lock bash -c 'start=$(date +%s.%N); "$@" 2>/dev/null | tail -1; end=$(date +%s.%N); echo "$start $end"' _ \
    "$bin" --data.train="$data/main_train.$fmt" --data.valid="$data/main_test.$fmt" --model.type=$model "${k[@]}" "${lr[@]}" \
    --train.l2=1e-5 --train.optimizer=adagrad --train.schema=flow --train.epochs=$epochs --train.patience=0 \
    --train.threads=$threads --train.log_every=1000000000)
  python3 - "$1" "$2" "$3" "$load1" "$log" >> "$out" <<'PY'
import json, sys
rnd, cfg, binary, load1, log = sys.argv[1:6]
summary, times = log.strip().split("\n")
s = json.loads(summary); start, end = map(float, times.split())
print(f"{rnd},{cfg},{binary},{s['setup_seconds']:.4f},{s['setup_startup_seconds']:.4f},{s['setup_data_seconds']:.4f},"
      f"{s['setup_model_seconds']:.5f},{s['setup_trainer_seconds']:.4f},{end - start:.3f},{s['valid_logloss']:.6f},{load1}")
PY
}
for r in $(seq "$rounds"); do
  for c in $configs; do
    if (( r % 2 )); then order="base new"; else order="new base"; fi
    for b in $order; do run "$r" "$c" "$b"; done
  done
done
