#!/usr/bin/env python3
"""Routing counts of moe_train's metrics summed over windows of consecutive iterations, for
scripts/reproduce_flexmoe_recorded.sh (issue 35 item 3, recorded half).

  trace_windows.py iterations PROBE.jsonl TOKENS CONFIG.ini  iterations per window so that every
                                                  MoE layer routes at least TOKENS tokens a window
  trace_windows.py sum METRICS.jsonl K OUT.jsonl  each K consecutive iterations' tokens_per_expert
                                                  summed into one line (a partial last window dropped)
  trace_windows.py table OUT_DIR GPUS             recorded.csv and the markdown table on stdout
"""
import configparser
import csv
import glob
import json
import math
import os
import sys

POLICIES = ["static", "deepspeed", "fastermoe", "flexmoe", "ideal"]


def counts(path):
    for line in open(path):
        j = json.loads(line)
        if "tokens_per_expert" in j:
            yield j["tokens_per_expert"]


def top_k(config):
    c = configparser.ConfigParser()
    c.read(config)
    return c.getint("moe", "top_k")


def iterations_per_window(probe, tokens, config):
    first = next(counts(probe))
    least = min(sum(layer) for layer in first) // top_k(config)  # tokens one iteration routes
    print(math.ceil(tokens / least))


def sum_windows(metrics, k, out):
    rows = list(counts(metrics))
    with open(out, "w") as f:
        for start in range(0, len(rows) - k + 1, k):
            window = rows[start : start + k]
            summed = [[sum(r[l][e] for r in window) for e in range(len(window[0][l]))] for l in range(len(window[0]))]
            f.write(json.dumps({"iteration": start // k, "tokens_per_expert": summed}) + "\n")


def table(out, gpus):
    rows = []
    for path in sorted(glob.glob(f"{out}/runs/*_sim.json")):
        model = os.path.basename(path).split("_")[0]
        j = json.load(open(path))
        windows = [w for w in counts(f"{out}/runs/{model}_windows.jsonl")]
        k = top_k(f"configs/moe_{model}_trace.ini")
        least = min(sum(layer) for w in windows for layer in w) // k
        for overlap in ("none", "pipelined"):
            ms = j[f"step_ms_{overlap}"]
            row = dict(model=model, overlap=overlap, gpus=gpus, windows=len(windows), top_k=k,
                       min_tokens_per_gpu=least // gpus, trace_balance=j["trace_balance"])
            row.update({f"{p}_ms": ms[p] for p in POLICIES})
            row.update(vs_fastermoe=ms["fastermoe"] / ms["flexmoe"], vs_deepspeed=ms["deepspeed"] / ms["flexmoe"],
                       vs_static=ms["static"] / ms["flexmoe"], flexmoe_over_ideal=ms["flexmoe"] / ms["ideal"],
                       plans=j["flexmoe_plans"]["plans"])
            rows.append(row)
    with open(f"{out}/recorded.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"### Recorded routing replayed at {gpus} GPUs (configs/sim_64gpu.ini)\n")
    print("| model | overlap | windows | min tokens/GPU | trace balance | " + " | ".join(f"{p} ms" for p in POLICIES) +
          " | vs fastermoe | vs deepspeed | vs static | flexmoe/ideal | plans |")
    print("|---|---|---|---|---|" + "---|" * (len(POLICIES) + 5))
    for r in rows:
        print(f"| {r['model']} | {r['overlap']} | {r['windows']} | {r['min_tokens_per_gpu']} | {r['trace_balance']:.2f} | " +
              " | ".join(f"{r[p + '_ms']:.3f}" for p in POLICIES) +
              f" | {r['vs_fastermoe']:.2f}x | {r['vs_deepspeed']:.2f}x | {r['vs_static']:.2f}x | "
              f"{r['flexmoe_over_ideal']:.2f} | {r['plans']} |")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "iterations":
        iterations_per_window(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "sum":
        sum_windows(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == "table":
        table(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
