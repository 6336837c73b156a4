#!/usr/bin/env bash
# A first run: installs what is missing, builds only the three trainers (no tests, no CUDA unless
# asked) into build-quickstart/ (never build/, which scripts/test.sh configures), runs each for a
# few seconds on built-in data under `mpirun -np 2`, then says what you should see and what next.
# About 3 minutes on a fresh 2-core machine, the package install included.
#   scripts/quickstart.sh [--cuda] [CMAKE_ARGS...]  --cuda (or SKEW_CUDA=ON) builds the CUDA parts too
#   scripts/quickstart.sh --prebuilt DIR            runs the apps of an existing build: no install, no build
# SKEW_BUILD_DIR changes the build directory, SKEW_OUT the output directory (out/quickstart).
# The install's and the build's output go to logs under the output directory, shown on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

apps=(wide_train moe_train preduce_train)
out=${SKEW_OUT:-out/quickstart}
build_dir=${SKEW_BUILD_DIR:-build-quickstart}
cuda=${SKEW_CUDA:-OFF}
prebuilt=""
cmake_args=()
while (($#)); do
  case $1 in
    --cuda) cuda=ON ;;
    --prebuilt) prebuilt=${2:?--prebuilt needs a build directory}; shift ;;
    *) cmake_args+=("$1") ;;
  esac
  shift
done
[[ -n $prebuilt ]] && build_dir=$prebuilt
steps=${#apps[@]}
[[ -z $prebuilt ]] && steps=$((steps + 2))  # the install and the build
step=0
started=$SECONDS

# "[mm:ss] step n/N: what" (time since the start).
elapsed() { printf '[%02d:%02d]' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)); }
say_step() {
  step=$((step + 1))
  echo "$(elapsed) step $step/$steps: $*"
}

# Runs a command with its output in LOG; on failure shows the log's end and stops.
run_logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "quickstart: '$*' failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

# Builds with the compiler's output in LOG, printing ninja's "done of total" every 20 seconds.
build_with_progress() {
  local log=$1 line next=$((SECONDS + 20))
  shift
  if ! "$@" 2>&1 | tee "$log" | while IFS= read -r line; do
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]] && ((SECONDS >= next)); then
      echo "$(elapsed)   compiled ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]}"
      next=$((SECONDS + 20))
    fi
  done; then
    echo "quickstart: the build failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

mkdir -p "$out"
if [[ -z $prebuilt ]]; then
  say_step "install missing packages (scripts/setup.sh; apt's output in $out/setup.log)"
  run_logged "$out/setup.log" scripts/setup.sh
  grep '^setup:' "$out/setup.log" | sed 's/^/    /'
  say_step "build ${apps[*]} into $build_dir/ (tests off, CUDA $cuda; output in $out/build.log)"
  SKEW_BUILD_DIR=$build_dir SKEW_BUILD_TARGETS="${apps[*]}" build_with_progress "$out/build.log" \
    scripts/build.sh -DSKEW_BUILD_TESTS=OFF -DSKEW_CUDA="$cuda" "${cmake_args[@]}"
fi

# Open MPI refuses root without these two; waiting ranks yield their core rather than spin.
[[ $(id -u) -eq 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1

declare -A what=(
  [wide_train]="a factorization machine on 20000 synthetic Criteo-like rows, 5 epochs"
  [moe_train]="a 2-block GPT-MoE with 4 experts on the built-in corpus, 50 iterations"
  [preduce_train]="partial reduce (P = 2) on generated clusters, rank 1 twice as slow, 300 steps"
)
for app in "${apps[@]}"; do
  dir="$out/$app"
  rm -rf "$dir" && mkdir -p "$dir"
  # The app's run directory (config.ini, metrics, summary.json, model or checkpoints) is $dir.
  command=(mpirun --oversubscribe -np 2 "$build_dir/apps/$app" --config "configs/${app%_train}.ini" --output.dir="$dir")
  say_step "run $app: ${what[$app]}"
  echo "    \$ ${command[*]}"
  run_logged "$dir/log.txt" "${command[@]}"
  grep -v '^{' "$dir/log.txt" | sed 's/^/    /'
done

# The value of KEY in APP's JSON summary (its log's last line that starts with '{'), printed
# with FORMAT (3 decimals unless given).
summary_value() {
  grep '^{' "$out/$1/log.txt" | tail -n 1 | grep -o "\"$2\":[^,}]*" | cut -d: -f2 | xargs printf "${3:-%.3f}"
}
wide="validation AUC $(summary_value wide_train valid_auc), logloss $(summary_value wide_train valid_logloss)"
moe="final loss $(summary_value moe_train final_loss), validation loss $(summary_value moe_train final_val_loss)"
moe+=", $(summary_value moe_train dropped %d) tokens dropped"
declare -A result=(
  [wide_train]="$wide (expect an AUC near 0.82)"
  [moe_train]="$moe (expect about 2.30, 2.27, 0)"
  [preduce_train]="test accuracy $(summary_value preduce_train final_accuracy_mean) (expect about 0.98)"
)
echo "$(elapsed) done. What you should see: each app's progress lines above, then"
for app in "${apps[@]}"; do
  files=$(ls -p "$out/$app" | paste -sd " ")
  printf '  %-14s %s\n  %-14s in %s/: %s\n' "$app" "${result[$app]}" "" "$out/$app" "$files"
done
cat <<NEXT
The last line of each log.txt is the run's JSON summary; the apps' keys: docs/configuration.md.
Next steps:
  1. Run every test (builds everything into build/, tests included): scripts/test.sh  (docs/testing.md)
  2. A bigger run, e.g. the BERT-style MoE, under a minute (configs/ holds a preset per experiment):
     mpirun --oversubscribe -np 2 $build_dir/apps/moe_train --config configs/moe_bert.ini
  3. Launch under Slurm, on one machine with scripts/slurm/local_cluster.sh: README.md's
     "Launching" section and docs/launching.md
NEXT
