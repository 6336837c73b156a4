#!/usr/bin/env bash
# Installs what is missing, builds, then runs each of the three apps that exists under
# `mpirun -np 2` on its built-in data (configs/<app>.ini) and prints where the output went.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
build_dir=${SKEW_BUILD_DIR:-build}
out=${SKEW_OUT:-out/quickstart}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ran=0
for app in wide_train moe_train preduce_train; do
  exe="$build_dir/apps/$app"
  if [[ ! -x "$exe" ]]; then
    echo "quickstart: $app is not built in this tree; skipping"
    continue
  fi
  dir="$out/$app"
  mkdir -p "$dir"
  echo "=== $app (mpirun -np 2, configs/${app%_train}.ini) ==="
  case $app in
    wide_train) outputs=(--output.dir="$dir") ;;
    moe_train) outputs=(--output.metrics="$dir/metrics.jsonl" --output.checkpoint_dir="$dir/checkpoints") ;;
    preduce_train) outputs=(--output.metrics="$dir/metrics_rank%r.jsonl" --output.curve="$dir/curve.csv") ;;
  esac
  mpirun --oversubscribe -np 2 "$exe" --config "configs/${app%_train}.ini" "${outputs[@]}" 2>&1 | tee "$dir/log.txt"
  echo "quickstart: $app output in $dir:"
  ls "$dir" | sed 's/^/    /'
  ran=$((ran + 1))
done
echo "quickstart: ran $ran app(s); outputs under $out/"
