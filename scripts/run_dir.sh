# shellcheck shell=bash
# Run directories for the bench, reproduce and calibrate scripts (sourced from the repository
# root). A script writes into a run directory of its own, never into results/, unless RECORD=1:
#   OUT=DIR      the run directory (default out/<script>/<UTC time>/); not under results/
#   RECORD=1     at the end, each claim folder under results/ is replaced whole by the run's copy
#                of it (so its CSVs, plots and README agree), the README keeping its text and a
#                generated "Last recorded run" section (command, commit, date, machine, load)
#   SMOKE=1      a script's reduced-size mode, for trying it and for tests: refuses RECORD=1
# A claim's run folder starts as a copy of the claim folder: its README and inputs (held-out
# splits, tuned settings, earlier runs a REUSE mode keeps) are there, and the script rewrites
# what it measures.
#   run_dir_start NAME "KNOB ..." ARGS...  picks RUN_DIR (the env knobs named are recorded) and
#                                           notes the commit (run_dir_code_commit)
#   run_dir_claim CLAIM DIR                 DIR (RUN_DIR or a folder in it) is CLAIM's run folder
#   run_dir_finish                          records the claims (RECORD=1); prints RUN_DIR
#   run_dir_require_apps BUILD APP ...      fails, naming the build command, unless each APP is built

run_dir_claims=()

run_dir_fail() {
  echo "$run_dir_name: $*" >&2
  exit 2
}

run_dir_require_apps() {
  local build=$1 app
  shift
  for app in "$@"; do
    [[ -x "$build/apps/$app" ]] || run_dir_fail "$build/apps/$app is not built (ninja -C $build $app)"
  done
}

run_dir_start() {
  run_dir_name=$1
  local knobs=$2 knob
  shift 2
  run_dir_command="scripts/$run_dir_name.sh${*:+ $*}"
  for knob in RECORD SMOKE $knobs; do
    [[ -n ${!knob:-} ]] && run_dir_command="$knob=${!knob} $run_dir_command"
  done
  case ${RECORD:-0} in
    0) run_dir_record=0 ;;
    1) run_dir_record=1 ;;
    *) run_dir_fail "RECORD=${RECORD} (RECORD=1 records into results/, unset or 0 does not)" ;;
  esac
  if ((run_dir_record)) && [[ ${SMOKE:-0} != 0 ]]; then
    run_dir_fail "a smoke run (SMOKE=1, --smoke) is not a measurement: RECORD=1 refused"
  fi
  RUN_DIR=${OUT:-out/$run_dir_name/$(date -u +%Y%m%dT%H%M%SZ)}
  local results
  results=$(realpath -m results)
  case $(realpath -m "$RUN_DIR")/ in
    "$results"/*) run_dir_fail "OUT=$RUN_DIR is under results/: run without OUT and with RECORD=1 to record" ;;
  esac
  mkdir -p "$RUN_DIR"
  run_dir_load_start=$(cut -d' ' -f1-3 /proc/loadavg)
  run_dir_code_commit=$(run_dir_commit)
  echo "$run_dir_name: writing to $RUN_DIR$( ((run_dir_record)) && echo ' (RECORD=1: its claim folders under results/ are replaced at the end)')"
}

run_dir_claim() {
  local claim=$1 dest=$2
  mkdir -p "$dest"
  # A fresh run folder starts as the claim's copy; an OUT given again keeps what it holds.
  if [[ -d $claim && -z $(ls -A "$dest") ]]; then cp -a "$claim/." "$dest/"; fi
  run_dir_claims+=("$claim|$dest")
}

# The commit the run's code came from, taken when the run starts (run_dir_code_commit):
# uncommitted changes are named, except under results/, which is what runs write (a script
# recording two claim folders copies the first in before it writes the second's record).
run_dir_commit() {
  local commit
  commit=$(git rev-parse --short HEAD 2>/dev/null) || { echo "unknown (not a git checkout)"; return; }
  if git diff --quiet HEAD -- . ':(exclude)results'; then echo "$commit"; else echo "$commit (with uncommitted changes)"; fi
}

# The README's text without an earlier generated section (between its markers: a script may
# append below it, as reproduce_flexmoe_models.sh appends its targets), then this run's.
run_dir_write_record() {
  local readme=$1/README.md kept
  kept=$(mktemp)
  [[ -f $readme ]] && sed '/^<!-- run_dir.sh: last recorded run -->$/,/^<!-- run_dir.sh: end -->$/d' "$readme" | cat -s >"$kept"
  {
    [[ -s $kept ]] && printf '%s\n\n' "$(cat "$kept")"
    echo "<!-- run_dir.sh: last recorded run -->"
    echo "## Last recorded run"
    echo
    echo "Written by scripts/run_dir.sh when the recorded run ended; the rest of this README is kept."
    echo
    echo "- command: \`$run_dir_command\`"
    echo "- commit: $run_dir_code_commit"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "- load (1, 5, 15 min): $run_dir_load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo "<!-- run_dir.sh: end -->"
  } >"$readme"
  rm -f "$kept"
}

run_dir_finish() {
  local pair claim dest
  if ((run_dir_record)); then
    for pair in "${run_dir_claims[@]}"; do
      claim=${pair%%|*} dest=${pair#*|}
      run_dir_write_record "$dest"
      rm -rf "$claim"
      mkdir -p "$(dirname "$claim")"
      cp -a "$dest" "$claim"
      echo "$run_dir_name: recorded $claim (replaced by $dest)"
    done
  fi
  echo "$run_dir_name: written to $RUN_DIR"
}
