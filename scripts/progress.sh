# shellcheck shell=bash
# The bench and reproduce scripts' n-of-N line, sourced:
#   progress_begin N       N runs follow (the clock starts)
#   progress_next NAME     before each: "[n/N] NAME ... elapsed 1m02s, ETA 3m10s" on stderr,
#                          the ETA the runs left at the mean time of those done so far
# stdout stays the scripts' own (results, tables).

progress_clock() { date +%s; }

# A duration for people, as the apps' progress lines write it: 42s, 3m05s, 2h07m.
progress_duration() {
  local s=$1
  if ((s < 60)); then
    printf '%ds' "$s"
  elif ((s < 3600)); then
    printf '%dm%02ds' $((s / 60)) $((s % 60))
  else
    printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
  fi
}

progress_begin() {
  progress_total=$1
  progress_done=0
  progress_start=$(progress_clock)
}

progress_next() {
  local elapsed eta='?'
  elapsed=$(($(progress_clock) - progress_start))
  if ((progress_done > 0)); then
    # rounded to the nearest second: elapsed x left / done
    eta=$(progress_duration $(((2 * elapsed * (progress_total - progress_done) + progress_done) / (2 * progress_done))))
  fi
  progress_done=$((progress_done + 1))
  printf '[%d/%d] %s ... elapsed %s, ETA %s\n' "$progress_done" "$progress_total" "$1" \
    "$(progress_duration "$elapsed")" "$eta" >&2
}
