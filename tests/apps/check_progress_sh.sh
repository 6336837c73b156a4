#!/usr/bin/env bash
# scripts/progress.sh on a fake clock: each line's n/N, elapsed and ETA against the closed form
# ETA = elapsed x (N - done) / done (rounded to the second), and the duration format.
set -euo pipefail
# shellcheck source=scripts/progress.sh
source "$(dirname "$0")/../../scripts/progress.sh"
now=1000
progress_clock() { echo "$now"; }
fail() { echo "FAIL: $*"; exit 1; }
line=$(mktemp)
trap 'rm -f "$line"' EXIT
expect() {  # expect NOW NAME LINE
  now=$1
  local got
  progress_next "$2" 2>"$line" >/dev/null  # not in a subshell: the count lives in this shell
  got=$(<"$line")
  [[ $got == "$3" ]] || fail "at $1 for $2: got '$got', expected '$3'"
  echo "$got"
}
progress_begin 4
expect 1000 static "[1/4] static ... elapsed 0s, ETA ?"
expect 1030 deepspeed "[2/4] deepspeed ... elapsed 30s, ETA 1m30s"         # 30 x 3 / 1
expect 1160 fastermoe "[3/4] fastermoe ... elapsed 2m40s, ETA 2m40s"       # 160 x 2 / 2
expect 4727 flexmoe "[4/4] flexmoe ... elapsed 1h02m, ETA 20m42s"          # 3727 x 1 / 3 = 1242.3
now=5000
progress_begin 7
expect 5000 a "[1/7] a ... elapsed 0s, ETA ?"
expect 5001 b "[2/7] b ... elapsed 1s, ETA 6s"                             # 1 x 6 / 1
expect 5001 c "[3/7] c ... elapsed 1s, ETA 3s"                             # 1 x 5 / 2 = 2.5, half up
expect 5010 d "[4/7] d ... elapsed 10s, ETA 13s"                           # 10 x 4 / 3 = 13.3
[[ $(progress_duration 59) == 59s && $(progress_duration 60) == 1m00s && $(progress_duration 3599) == 59m59s &&
   $(progress_duration 3600) == 1h00m && $(progress_duration 7620) == 2h07m ]] || fail "durations"
# stdout stays the script's: the line goes to stderr only.
[[ -z $(progress_next e 2>/dev/null) ]] || fail "wrote to stdout"
echo PASS
