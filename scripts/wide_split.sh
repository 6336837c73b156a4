# shellcheck shell=bash
# A held-out split of wide_train's synthetic data, shared by the wide bench scripts (sourced from
# the repository root).
#   wide_make_split WIDE_TRAIN DATA_DIR NAME SPEC TEST_ROWS
# writes DATA_DIR/NAME_{train,test}.{libsvm,libffm} from one `wide_train --export` of
# synthetic:criteo?SPEC, the last TEST_ROWS rows the test set; the libsvm ids shifted to start at
# 1, as LIBLINEAR requires. The files are kept between runs: DATA_DIR/NAME.spec records what made
# them, and a different SPEC or TEST_ROWS makes them again (never a stale split of another size).
wide_make_split() {
  local wide_train=$1 data=$2 name=$3 spec=$4 test=$5 fmt total all made_by
  made_by="$spec test_rows=$test"
  if [[ -f $data/$name.spec && $(cat "$data/$name.spec") == "$made_by" ]]; then return; fi
  # The splits and every cache a tool keeps beside them (FILE.skewbin, FILE.bin, LIBFFM's links).
  rm -f "$data/$name.spec" "$data/${name}"_{train,test}.*
  mkdir -p "$data"
  all=$(mktemp -p "$data")
  for fmt in libsvm libffm; do
    "$wide_train" --export="$all.$fmt" --data.train="synthetic:criteo?$spec" >/dev/null
    if [[ $fmt == libsvm ]]; then
      awk '{ printf "%s", $1; for (i = 2; i <= NF; ++i) { split($i, t, ":"); printf " %d:%s", t[1] + 1, t[2] } print "" }' \
        "$all.$fmt" >"$all" && mv "$all" "$all.$fmt"
    fi
    total=$(wc -l <"$all.$fmt")
    head -n $((total - test)) "$all.$fmt" >"$data/${name}_train.$fmt"
    tail -n "$test" "$all.$fmt" >"$data/${name}_test.$fmt"
    rm -f "$all.$fmt"
  done
  rm -f "$all"
  echo "$made_by" >"$data/$name.spec"
}
