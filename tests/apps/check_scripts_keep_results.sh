#!/usr/bin/env bash
# The test of scripts/run_dir.sh and the scripts on it: a default run leaves results/ alone.
#   1. scripts/bench_moe.sh, bench_wide_sweep.sh, reproduce_flexmoe.sh (with its recorded part;
#      and bench_wide_peers.sh where the peers are built) with SMOKE=1 and their default output (a run directory under
#      out/, removed afterwards): results/ must be unchanged, in `git status --porcelain` and in
#      every file's content, and each run directory holds its CSVs; RECORD=1 with SMOKE=1 must
#      be refused.
#   2. RECORD=1 in a scratch tree: the claim folder is replaced by the run's folder, its README
#      keeps the hand-written text and what the runs appended, and has one "Last recorded run"
#      section, however often recorded.
# Usage: tests/apps/check_scripts_keep_results.sh BUILD_DIR  (exit 77: skipped, not a git checkout)
set -euo pipefail
build=$(realpath "$1")
root=$(realpath "$(dirname "$0")/../..")
cd "$root"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIPPED: $root is not a git checkout, so git status cannot tell whether results/ changed"
  exit 77
fi
snapshot() { git status --porcelain -- results; find results -type f -print0 | sort -z | xargs -0 sha1sum; }
before=$(snapshot)

run_dirs=()
trap 'rm -rf "${run_dirs[@]}"' EXIT
smoke() {  # smoke SCRIPT FILE_EXPECTED_IN_ITS_RUN_DIR [SCRIPT ARGS...]
  local log dir
  log=$(SMOKE=1 SKEW_BUILD_DIR="$build" "scripts/$1.sh" "${@:3}" 2>&1) || { echo "$log"; fail "SMOKE=1 scripts/$1.sh failed"; }
  dir=$(sed -n "s/^$1: written to //p" <<<"$log")
  [[ $dir == out/$1/* ]] || { echo "$log"; fail "scripts/$1.sh did not say it wrote to out/$1/..."; }
  run_dirs+=("$root/$dir")
  [[ -s $dir/$2 ]] || fail "$dir/$2 missing"
  echo "$1: SMOKE=1 wrote $dir"
}
smoke bench_moe bench_moe.csv
smoke bench_wide_sweep sweep.csv "$build"
smoke reproduce_flexmoe sim_64gpu/sim_summary.csv
# its recorded part (scripts/reproduce_flexmoe_recorded.sh): every model's routing summed to the
# smoke's token target (64 a simulated GPU) in each window and replayed under both schedules
recorded=${run_dirs[-1]}/scale/recorded/recorded.csv
/usr/bin/python3 - "$recorded" <<'PY' || fail "$recorded: not every model x schedule replayed at 64+ tokens a GPU"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cells = {(r["model"], r["overlap"]) for r in rows if int(r["min_tokens_per_gpu"]) >= 64 and int(r["windows"]) == 2}
sys.exit(cells != {(m, o) for m in ("gpt", "bert", "swin") for o in ("none", "pipelined")})
PY
# its per-plan prediction study: the held-out scenarios at drift 0 (the smoke's only slower drift),
# at the held-out drift, and with the present load exact, each under both schedules
prediction=${run_dirs[-1]}/scale/prediction.csv
/usr/bin/python3 - "$prediction" <<'PY' || fail "$prediction: not every drift x estimate x schedule of the study"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cells = {(float(r["drift"]), r["estimate"].split()[0], r["overlap"]) for r in rows}
sys.exit(cells != {(d, e, o) for d, e in ((0, "smoothed"), (0.05, "smoothed"), (0.05, "exact"))
                   for o in ("none", "pipelined")})
PY
# bench_wide_peers runs the peers' binaries (scripts/peers/build.sh): tried where they are built.
if [[ -x ${PEERS_BIN:-/work/peers/bin}/xlearn_train ]]; then
  smoke bench_wide_peers table.md "$build"
else
  echo "bench_wide_peers: not tried (no peers' binaries in ${PEERS_BIN:-/work/peers/bin})"
fi
for script in bench_moe reproduce_flexmoe; do
  if RECORD=1 SMOKE=1 SKEW_BUILD_DIR="$build" "scripts/$script.sh" >/dev/null 2>&1; then
    fail "RECORD=1 SMOKE=1 scripts/$script.sh was not refused"
  fi
done
[[ $(snapshot) == "$before" ]] || fail "results/ changed: $(diff <(echo "$before") <(snapshot) | head -20)"
echo "results/ unchanged"

# 2. RECORD=1 on a scratch claim folder.
scratch=$(mktemp -d)
run_dirs+=("$scratch")
mkdir -p "$scratch/results/claim"
printf '# A claim\n\nHand-written text.\n' >"$scratch/results/claim/README.md"
echo old >"$scratch/results/claim/table.csv"
for value in 1 2; do
  (
    cd "$scratch"
    export RECORD=1 OUT=out/run$value
    source "$root/scripts/run_dir.sh"
    run_dir_start demo "" --flag
    run_dir_claim results/claim "$RUN_DIR"
    echo "$value" >"$RUN_DIR/table.csv"
    echo "Appended by run $value." >>"$RUN_DIR/README.md"
    run_dir_finish
  ) >/dev/null
done
readme=$scratch/results/claim/README.md
[[ $(cat "$scratch/results/claim/table.csv") == 2 ]] || fail "RECORD=1 did not replace the claim's table"
for line in 'Hand-written text.' 'Appended by run 1.' 'Appended by run 2.'; do
  grep -qx "$line" "$readme" || fail "RECORD=1 lost the README's line '$line'"
done
[[ $(grep -c '^## Last recorded run$' "$readme") == 1 ]] || fail "README has not exactly one generated section"
# shellcheck disable=SC2016 # the backticks are the README's, not a command
grep -q 'command: `RECORD=1 scripts/demo.sh --flag`' "$readme" || fail "README's section lacks the command"
grep -q '^- load (1, 5, 15 min): ' "$readme" || fail "README's section lacks the machine load"
cmp -s "$readme" "$scratch/out/run2/README.md" || fail "the claim folder and its run folder differ"
echo "RECORD=1: claim folder replaced, README kept with one generated section"
