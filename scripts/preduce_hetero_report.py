#!/usr/bin/env python3
"""Tables of scripts/bench_preduce_hetero.sh.

  preduce_hetero_report.py tune OUT    runs/dev/*.json -> dev.csv (mean time to accuracy per
                                       variant and skew) and tuned.txt (each mode's variant with
                                       the lowest mean over the whole development set)
  preduce_hetero_report.py report OUT  runs/heldout/*.json -> results.csv and tta.png

Time to accuracy: the summary's time_to_target_s plus auto_warmup_s (P = auto's warm-up window);
a run that never reaches the target (time_to_target_s -1) counts as its wall_s (censored,
counted in the table: a lower bound on its time).
Intervals: 95% Student t over the seeds; partial reduce's speedup over a baseline is the mean of
the per-seed ratios baseline / partial reduce, with its own t-interval.
"""
import csv, glob, json, math, os, re, statistics, sys

NAME = re.compile(r"^(?P<model>.+?)_(?P<variant>allreduce.*|preduce_.+|adpsgd.*|eager.*)_s(?P<seed>\d+)\.json$")
# Two-sided 95% Student t quantiles by degrees of freedom (scipy is not on this machine).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 11: 2.201, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t95(df):
    return T95.get(df) or T95[max(k for k in T95 if k <= df)] if df >= 1 else float("nan")


def load(runs):
    """{(model, variant): {seed: (tta, censored, summary)}}; only the seeds in $SEEDS if set."""
    only = {int(x) for x in os.environ.get("SEEDS", "").split()}
    table = {}
    for path in sorted(glob.glob(f"{runs}/*.json")):
        m = NAME.match(os.path.basename(path))
        if not m or (only and int(m["seed"]) not in only):
            continue
        s = json.load(open(path))
        tta = s["time_to_target_s"]
        censored = tta is None or tta < 0  # Curve::time_to gives -1 for never
        tta = (s["wall_s"] if censored else tta) + s.get("auto_warmup_s", 0.0)
        table.setdefault((m["model"], m["variant"]), {})[int(m["seed"])] = (tta, censored, s)
    return table


def models_of(set_file):
    return [line.split()[1] for line in open(set_file) if line.startswith("model ")]


def mean_ci(xs):
    m = statistics.fmean(xs)
    half = t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return m, half


def tune(out):
    table = load(f"{out}/runs/dev")
    models = models_of(f"{out}/dev.txt")
    variants = sorted({v for _, v in table})
    with open(f"{out}/dev.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["skew", "variant", "seeds", "mean_tta_s", "ci95_s", "censored", "group_size"])
        for model in models:
            for v in variants:
                runs = table.get((model, v), {})
                if not runs:
                    continue
                m, h = mean_ci([r[0] for r in runs.values()])
                p = sorted({r[2].get("group_size", "") for r in runs.values()}, key=str)
                w.writerow([model, v, len(runs), f"{m:.3f}", f"{h:.3f}", sum(r[1] for r in runs.values()),
                            "/".join(map(str, p))])
    # Only variants run on the whole development set compete (a partial sweep is not comparable).
    seeds = [int(x) for line in open(f"{out}/dev.txt") if line.startswith("seeds ") for x in line.split()[1:]]
    complete = [v for v in variants if all(s in table.get((m, v), {}) for m in models for s in seeds)]
    overall = {v: statistics.fmean([r[0] for (mo, vv), runs in table.items() if vv == v for r in runs.values()])
               for v in complete}
    print("dev: mean time to accuracy over all skews and seeds")
    for v in variants:
        print(f"  {v:26s} " + (f"{overall[v]:.3f} s" if v in overall else "partial sweep, not compared"))
    with open(f"{out}/tuned.txt", "w") as f:
        for family in ("allreduce", "preduce_auto", "adpsgd", "eager"):
            best = min((v for v in complete if v.startswith(family)), key=overall.get)
            print(f"tuned {family}: {best} ({overall[best]:.3f} s)")
            f.write(f"{best}\n")


def report(out):
    table = load(f"{out}/runs/heldout")
    models = models_of(f"{out}/heldout.txt")
    # The modes at their tuned settings only (runs/heldout may hold others from earlier sweeps).
    tuned = open(f"{out}/tuned.txt").read().split()
    variants = [v for v in sorted({v for _, v in table}) if v in tuned]
    baselines = [v for v in variants if v.startswith(("adpsgd", "eager"))]
    ours_name = next(v for v in variants if v.startswith("preduce_auto"))
    allreduce = next(v for v in variants if v.startswith("allreduce"))
    rows, plot = [], {}
    for model in models:
        stats = {}
        for v in variants:
            runs = table.get((model, v), {})
            if runs:
                stats[v] = mean_ci([r[0] for r in runs.values()]) + (sum(r[1] for r in runs.values()), len(runs))
        best = min(baselines, key=lambda v: stats[v][0])
        ours = table[(model, ours_name)]
        ratio = {b: mean_ci([table[(model, b)][s][0] / ours[s][0] for s in ours]) for b in (best, allreduce)}
        lo = ratio[best][0] - ratio[best][1]
        hi = ratio[best][0] + ratio[best][1]
        verdict = ("partial reduce wins" if lo > 1 else "partial reduce loses" if hi < 1 else
                   "level: the interval includes 1")
        p = "/".join(sorted({str(r[2].get("group_size")) for r in ours.values()}))
        for v in variants:
            m, h, cens, n = stats[v]
            rows.append([model, v, n, f"{m:.3f}", f"{h:.3f}", cens,
                         p if v == ours_name else "",
                         f"{ratio[best][0]:.3f}" if v == ours_name else "",
                         f"{ratio[best][1]:.3f}" if v == ours_name else "",
                         best if v == ours_name else "",
                         f"{ratio[allreduce][0]:.3f}" if v == ours_name else "",
                         verdict if v == ours_name else ""])
        plot[model] = stats
    header = ["skew", "mode", "seeds", "mean_tta_s", "ci95_s", "censored", "auto_group_size",
              "speedup_vs_best_baseline", "speedup_ci95", "best_baseline", "speedup_vs_allreduce", "verdict"]
    with open(f"{out}/results.csv", "w", newline="") as f:
        csv.writer(f).writerows([header] + rows)
    for r in rows:
        print(",".join(map(str, r)))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: tta.png not written")
        return
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        xs = [k + i * width for k in range(len(models))]
        ax.bar(xs, [plot[m][v][0] for m in models], width, yerr=[plot[m][v][1] for m in models], label=v, capsize=2)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(models))])
    ax.set_xticklabels(models)
    ax.set_ylabel("virtual seconds to 90% (mean, 95% CI)")
    ax.set_title("held-out skews, 16 simulated workers")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/tta.png", dpi=90)


if __name__ == "__main__":
    {"tune": tune, "report": report}[sys.argv[1]](sys.argv[2])
