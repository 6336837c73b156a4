#!/usr/bin/env python3
"""The table of scripts/bench_moe_skewed.sh: measured 2-rank moe_train runs beside placement_sim's
prediction of the same runs. Usage: bench_moe_skewed_table.py RUN_DIR ITERATIONS REPEATS.
Reads RUN_DIR/runs/<policy>.<repeat>.jsonl (metrics), record.jsonl (the recorded routing),
sim_cf<cf>.json (placement_sim's summaries) and sim_cf<cf>.steps.csv (its per-iteration steps);
writes RUN_DIR/table.csv, prints the markdown."""
import csv
import glob
import json
import statistics
import sys

POLICIES = ["flexmoe", "fastermoe", "deepspeed_dropless", "deepspeed_cf1.0", "deepspeed_cf1.25"]
# Each policy's step in placement_sim's summaries: the file and the policy key there.
SIM = {"flexmoe": ("0", "flexmoe"), "fastermoe": ("0", "fastermoe"), "deepspeed_dropless": ("0", "deepspeed"),
       "deepspeed_cf1.0": ("1.0", "deepspeed"), "deepspeed_cf1.25": ("1.25", "deepspeed")}
OVERLAPS = ("none", "pipelined")


def records(path):
    return [json.loads(line) for line in open(path)]


def moe_seconds(rec):
    t = rec["time"]
    return t["expert"] + t["alltoall"] + t["sync"]


def run_figures(path, target):
    """Median step and MoE part (first iteration left out), iterations and wall time until the
    validation loss reaches `target` (None: not reached), final validation loss."""
    recs = records(path)
    steps = [r["step_s"] for r in recs[1:]]
    moe = [moe_seconds(r) for r in recs[1:]]
    elapsed, reached = 0.0, None
    for r in recs:
        elapsed += r["step_s"]
        if reached is None and "val_loss" in r and target is not None and r["val_loss"] <= target * (1 + 1e-6):
            reached = (r["iter"] + 1, elapsed)
    vals = [r["val_loss"] for r in recs if "val_loss" in r]
    return dict(step=statistics.median(steps), moe=statistics.median(moe), reached=reached, val=vals[-1])


def sim_step_medians(path):
    """placement_sim's per-iteration steps (output.steps_csv): the median over iterations with the
    first left out, per (overlap, policy), the statistic the measured columns take. Not the
    summary's mean: a dropless run's padded rows grow over the first iterations as the routing
    collapses (the recorded trace's mean is 5% below its median)."""
    steps = {}
    for r in csv.DictReader(open(path)):
        if int(r["iteration"]) > 0:
            steps.setdefault((r["overlap"], r["policy"]), []).append(float(r["step_ms"]))
    return {k: statistics.median(v) for k, v in steps.items()}


def main():
    out, iterations, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    runs = f"{out}/runs"
    dropless = [records(p) for p in sorted(glob.glob(f"{runs}/deepspeed_dropless.*.jsonl"))]
    target = statistics.median([[r["val_loss"] for r in recs if "val_loss" in r][-1] for recs in dropless])
    sims = {cf: json.load(open(f"{runs}/sim_cf{cf}.json")) for cf in ("0", "1.0", "1.25")}
    sim_steps = {cf: sim_step_medians(f"{runs}/sim_cf{cf}.steps.csv") for cf in ("0", "1.0", "1.25")}
    routing = records(f"{runs}/record.jsonl")[:iterations]
    expert_balance = statistics.mean(statistics.mean(r["expert_balance"]) for r in routing)
    rows = {}
    for p in POLICIES:
        figs = [run_figures(path, target) for path in sorted(glob.glob(f"{runs}/{p}.*.jsonl"))]
        assert len(figs) == repeats, f"{p}: {len(figs)} runs, expected {repeats}"
        steps = [f["step"] for f in figs]
        reached = [f["reached"] for f in figs if f["reached"]]
        rows[p] = dict(policy=p, step_ms=1e3 * statistics.median(steps),
                       spread_pct=100 * (max(steps) - min(steps)) / statistics.median(steps),
                       moe_ms=1e3 * statistics.median(f["moe"] for f in figs),
                       val_loss=statistics.median(f["val"] for f in figs),
                       reached_runs=len(reached),
                       iters_to_target=statistics.median(r[0] for r in reached) if reached else None,
                       s_to_target=statistics.median(r[1] for r in reached) if reached else None)
    # The non-MoE part of a step, the same model and batch for every policy: the recording run's
    # (static: no padding, no placement changes). Not a padded run's: moe_train's work on padded
    # rows outside the expert and all-to-all timers (dispatch and combine buffers, their zeroing)
    # lands in the non-MoE part, about 8 ms a step in the dropless run here, and the simulator
    # models none of it.
    recorded = run_figures(f"{runs}/record.jsonl", None)
    dense_ms = 1e3 * (recorded["step"] - recorded["moe"])
    for p, row in rows.items():
        cf, key = SIM[p]
        for ov in OVERLAPS:
            sim_ms = sim_steps[cf][(ov, key)]
            row[f"sim_moe_ms_{ov}"] = sim_ms
            row[f"pred_step_ms_{ov}"] = dense_ms + sim_ms
            row[f"pred_err_pct_{ov}"] = 100 * ((dense_ms + sim_ms) / row["step_ms"] - 1)
            its = row["iters_to_target"]
            row[f"pred_s_to_target_{ov}"] = (dense_ms + sim_ms) * 1e-3 * its if its else None
    with open(f"{out}/table.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows["flexmoe"].keys()))
        w.writeheader()
        w.writerows(rows.values())

    def fmt(x, nd=1, suffix=""):
        return "-" if x is None else f"{x:.{nd}f}{suffix}"

    sim0 = sims["0"]
    print(f"Routing: recorded static run, {iterations} iterations; trace balance ratio (busiest rank / mean, "
          f"static placement) {sim0['trace_balance']:.2f}, hottest expert / mean {expert_balance:.2f}. "
          f"Target validation loss (dropless final): {target:.4f}. Repeats: {repeats}, interleaved. "
          f"Non-MoE part of a step (measured, the static recording run): {dense_ms:.1f} ms.\n")
    print("| policy | step ms (measured) | spread | MoE part ms (measured) | MoE part ms (sim none / pipelined) | "
          "step ms predicted (none / pipelined) | error (none / pipelined) | val loss | iterations to target | "
          "s to target (measured) | s to target (predicted none / pipelined) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows.values():
        print(f"| {r['policy']} | {fmt(r['step_ms'])} | {fmt(r['spread_pct'], 0, '%')} | {fmt(r['moe_ms'])} | "
              f"{fmt(r['sim_moe_ms_none'])} / {fmt(r['sim_moe_ms_pipelined'])} | {fmt(r['pred_step_ms_none'])} / "
              f"{fmt(r['pred_step_ms_pipelined'])} | {fmt(r['pred_err_pct_none'], 0, '%')} / "
              f"{fmt(r['pred_err_pct_pipelined'], 0, '%')} | {r['val_loss']:.4f} | "
              f"{fmt(r['iters_to_target'], 0) if r['reached_runs'] else 'not reached'} | {fmt(r['s_to_target'], 2)} | "
              f"{fmt(r['pred_s_to_target_none'], 2)} / {fmt(r['pred_s_to_target_pipelined'], 2)} |")
    fx = rows["flexmoe"]
    print()
    for p in POLICIES[1:]:
        r = rows[p]
        measured = r["s_to_target"] / fx["s_to_target"] if r["s_to_target"] and fx["s_to_target"] else None
        predicted = [r[f"pred_s_to_target_{ov}"] / fx[f"pred_s_to_target_{ov}"]
                     if r[f"pred_s_to_target_{ov}"] and fx[f"pred_s_to_target_{ov}"] else None for ov in OVERLAPS]
        print(f"- flexmoe over {p}, time to the target loss: measured {fmt(measured, 2, 'x')}, predicted "
              f"{fmt(predicted[0], 2, 'x')} (none) / {fmt(predicted[1], 2, 'x')} (pipelined)")
    print(f"\nSimulated flexmoe placement changes: {sim0['flexmoe_changes']}. Cost constants: the median of "
          f"flexmoe's start-up measurements (runs/flexmoe.*.json, cost_constants).")


if __name__ == "__main__":
    main()
