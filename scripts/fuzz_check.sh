#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan+UBSan, CUDA off) into
# ${SKEW_FUZZ_BUILD_DIR:-build-fuzz} and runs each a fixed number of executions from its seed
# corpus (tests/fuzz/corpus/<name>/) with a fixed seed. Any crash, sanitizer report, leak, input
# slower than 10 s or allocation over 2 GiB fails the script; the input is left in
# <build>/artifacts/<name>/ (replay it with: <build>/tests/fuzz/fuzz_<name> FILE).
#   SKEW_FUZZ_RUNS=N   executions per harness (default 150000: 2-3 minutes for all seven on 2 cores)
#   SKEW_FUZZ_SEED=S   libFuzzer seed (default 1)
#   scripts/fuzz_check.sh [name...]   only these harnesses
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --fuzz
build=${SKEW_FUZZ_BUILD_DIR:-build-fuzz}
runs=${SKEW_FUZZ_RUNS:-150000}
seed=${SKEW_FUZZ_SEED:-1}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSKEW_CUDA=OFF \
  -DSKEW_FUZZ=ON -DSKEW_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "${SKEW_JOBS:-$(nproc)}" --target skew_fuzz

declare -A dict=([config]=config [libsvm]=text [libffm]=text [skewbin]="" [safetensors]=json [trace]=json [replay]="")
names=("$@")
((${#names[@]})) || names=(config libsvm libffm skewbin safetensors trace replay)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for name in "${names[@]}"; do
  [[ -v "dict[$name]" ]] || { echo "fuzz_check: no harness '$name'" >&2; exit 2; }
  work="$build/fuzz-work/$name" artifacts="$build/artifacts/$name"
  rm -rf "$work" && mkdir -p "$work" "$artifacts"
  args=(-runs="$runs" -seed="$seed" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048
        -artifact_prefix="$artifacts/" -print_final_stats=1)
  [[ -n "${dict[$name]}" ]] && args+=(-dict="tests/fuzz/dict/${dict[$name]}.dict")
  start=$SECONDS
  # New inputs go to the scratch corpus $work, never into the committed seeds.
  if "$build/tests/fuzz/fuzz_$name" "${args[@]}" "$work" "tests/fuzz/corpus/$name" >"$build/fuzz-$name.log" 2>&1; then
    echo "fuzz_check: $name: $runs runs, $((SECONDS - start)) s, ok"
  else
    echo "fuzz_check: $name: FAILED after $((SECONDS - start)) s; log $build/fuzz-$name.log, input in $artifacts/"
    tail -n 40 "$build/fuzz-$name.log"
    failed+=("$name")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz_check: ${#failed[@]} harness(es) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz_check: all ${#names[@]} harnesses ran $runs times without a crash"
