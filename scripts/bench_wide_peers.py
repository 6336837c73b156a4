#!/usr/bin/env python3
"""scripts/bench_wide_peers.sh's helper: one metric code for every tool's test scores, each
tool's per-epoch times read from its own log, and the medians table.

  bench_wide_peers.py liblinear-scores PRED      LIBLINEAR's `predict -b 1` output -> P(label 1) per line
  bench_wide_peers.py row TOOL LOG WALL SCORES TEST TRAIN_ROWS EPOCHS
      -> rows_per_s_epoch,wall_s,test_auc,test_logloss (rows/s empty where the tool logs no epoch times)
  bench_wide_peers.py table OUT                  OUT/runs.csv -> OUT/table.csv and OUT/table.md
"""
import csv
import json
import math
import re
import statistics
import sys
from collections import defaultdict

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def labels(test):
    return [1 if float(line.split()[0]) > 0 else 0 for line in open(test) if line.strip()]


def auc_logloss(scores, y):
    p = [min(max(s, 1e-15), 1 - 1e-15) for s in scores]
    logloss = -sum(math.log(q) if t else math.log(1 - q) for q, t in zip(p, y)) / len(y)
    pairs = sorted(zip(scores, y))
    pos = sum(y)
    neg = len(y) - pos
    rank_sum, i = 0.0, 0
    while i < len(pairs):  # ties share their mean rank
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        rank_sum += sum(t for _, t in pairs[i:j]) * (i + j + 1) / 2.0
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg), logloss


def epoch_seconds(tool, log):
    """The training epochs' seconds in all, as the tool logs them; None where it logs none."""
    text = ANSI.sub("", open(log, errors="replace").read())
    if tool == "wide":
        summary = json.loads(text.strip().splitlines()[-1])
        return None, summary["train_samples_per_s"]
    if tool == "xlearn":  # "Epoch  Train log_loss  Time cost (sec)" rows
        times = [float(m.group(1)) for m in re.finditer(r"^\[[^\]]*\]\s+\d+\s+[\d.]+\s+([\d.]+)\s*$", text, re.M)]
        return (sum(times) if times else None), None
    if tool == "libffm":  # "iter tr_logloss tr_time": tr_time is cumulative
        times = [float(m.group(1)) for m in re.finditer(r"^\s+\d+\s+[\d.]+\s+([\d.]+)\s*$", text, re.M)]
        return (times[-1] if times else None), None
    return None, None


def row(tool, log, wall, scores_path, test, train_rows, epochs):
    y = labels(test)
    scores = [float(line.split()[0]) for line in open(scores_path) if line.strip()]
    assert len(scores) == len(y), f"{tool}: {len(scores)} scores for {len(y)} test rows"
    auc, logloss = auc_logloss(scores, y)
    seconds, rows_per_s = epoch_seconds(tool, log)
    if rows_per_s is None and seconds:
        rows_per_s = int(train_rows) * int(epochs) / seconds
    rps = f"{rows_per_s:.0f}" if rows_per_s else ""
    print(f"{rps},{float(wall):.3f},{auc:.6f},{logloss:.6f}")


def liblinear_scores(pred):
    lines = open(pred).read().split("\n")
    col = lines[0].split()[1:].index("1") + 1
    for line in lines[1:]:
        if line.strip():
            print(line.split()[col])


def table(out):
    runs = list(csv.DictReader(open(f"{out}/runs.csv")))
    groups = defaultdict(list)
    for r in runs:
        groups[(r["model"], r["threads"], r["tool"])].append(r)

    def median(rs, key):
        values = [float(r[key]) for r in rs if r[key]]
        return statistics.median(values) if values else None

    rows = []
    for (model, threads, tool), rs in sorted(groups.items()):
        rows.append(dict(model=model, threads=threads, tool=tool, lr=rs[0]["lr"], runs=len(rs),
                         load_median=median(rs, "load_1min"), rows_per_s_epoch=median(rs, "rows_per_s_epoch"),
                         wall_s=median(rs, "wall_s"), test_auc=median(rs, "test_auc"),
                         test_logloss=median(rs, "test_logloss")))
    fields = list(rows[0].keys()) + ["epoch_speedup_vs_best_peer", "wall_speedup_vs_best_peer"]
    for r in rows:  # against the fastest peer of the same model at the same thread count
        peers = [p for p in rows if p["model"] == r["model"] and p["threads"] == r["threads"] and p["tool"] != "wide"]
        fastest_epoch = max((p["rows_per_s_epoch"] for p in peers if p["rows_per_s_epoch"]), default=None)
        fastest_wall = min((p["wall_s"] for p in peers), default=None)
        r["epoch_speedup_vs_best_peer"] = (r["rows_per_s_epoch"] / fastest_epoch
                                           if r["tool"] == "wide" and fastest_epoch and r["rows_per_s_epoch"] else None)
        r["wall_speedup_vs_best_peer"] = fastest_wall / r["wall_s"] if r["tool"] == "wide" and fastest_wall else None
    with open(f"{out}/table.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)

    def fmt(v, spec):
        return "" if v is None else format(v, spec)

    lines = ["| model | threads | tool | lr (C) | runs | load | rows/s per epoch | whole run s | test AUC | test logloss "
             "| wide/fastest peer, epoch rows/s | wide/fastest peer, whole run |", "|---" * 12 + "|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['tool']} | {r['lr']} | {r['runs']} | "
                     f"{fmt(r['load_median'], '.2f')} | {fmt(r['rows_per_s_epoch'], '.0f')} | {fmt(r['wall_s'], '.2f')} | "
                     f"{fmt(r['test_auc'], '.4f')} | {fmt(r['test_logloss'], '.4f')} | "
                     f"{fmt(r['epoch_speedup_vs_best_peer'], '.2f')} | {fmt(r['wall_speedup_vs_best_peer'], '.2f')} |")
    open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "-h"
    if cmd == "row":
        row(*sys.argv[2:9])
    elif cmd == "liblinear-scores":
        liblinear_scores(sys.argv[2])
    elif cmd == "table":
        table(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(0 if cmd in ("-h", "--help") else 2)
