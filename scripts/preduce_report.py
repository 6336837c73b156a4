#!/usr/bin/python3
"""Time-to-accuracy table and plots of scripts/bench_preduce.sh, from the runs it wrote.

  scripts/preduce_report.py REAL_DIR SCALE_DIR REPEATS SCALE_SEEDS
      (bench_preduce.sh: results/preduce/mnist_4rank results/preduce/sim_scale 3 6)

Reads REAL_DIR/runs/{curve,summary}_{real,sim}_4_* (4 ranks and their simulation, with
calibration.txt) and SCALE_DIR/runs/{curve,summary}_sim_{32,256}_* (the simulator at scale);
writes REAL_DIR/results.csv and SCALE_DIR/results.csv (the rows for 4 and for 32 / 256 workers)
and a tta.png in each (matplotlib permitting). Prints the whole table.

  scripts/preduce_report.py --studies CLAIM_DIR TARGETS
      (results/preduce/mnist_4rank 0.95,0.94; results/preduce/sim_scale 0.9)

Tabulates the runs of the targeted studies in CLAIM_DIR/runs/<study>/ (confirm, placement, seeds,
seeds_sim; group_size), run by hand with the commands in the claim README, into
CLAIM_DIR/studies.csv: per run, the time to each target and the final mean worker accuracy.
"""
import csv, json, math, os, re, statistics, sys
if sys.argv[1:2] == ["--studies"]:
    # scripts/preduce_report.py --studies CLAIM_DIR TARGET[,TARGET...]: one row per run of each
    # study folder CLAIM_DIR/runs/<study>/ (curve_<mode>_<r|s|seed><k>.csv beside its summary
    # JSON): time to each target by the bench's rule below, and the final mean worker accuracy
    # -> CLAIM_DIR/studies.csv.
    claim, targets = sys.argv[2], [float(t) for t in sys.argv[3].split(",")]
    def tta_(points, target, window=4):
        for k in range(window - 1, len(points)):
            if sum(a for _, a in points[k - window + 1 : k + 1]) / window >= target:
                return points[k][0]
        return ""
    out = []
    for study in sorted(os.listdir(f"{claim}/runs")):
        d = f"{claim}/runs/{study}"
        if not os.path.isdir(d):
            continue
        for path in sorted(os.listdir(d)):
            m = re.fullmatch(r"curve_(.+)_(r|s|seed)(\d+)\.csv", path)
            if not m:
                continue
            pts = [(float(t), float(a)) for t, a in list(csv.reader(open(f"{d}/{path}")))[1:]]
            summ = f"{d}/summary_{m.group(1)}_{m.group(2)}{m.group(3)}.json"
            final = json.load(open(summ)).get("final_accuracy_mean", "") if os.path.exists(summ) else ""
            row = dict(study=study, mode=m.group(1), run="seed" if m.group(2) != "r" else "repeat", k=int(m.group(3)))
            row.update({f"tta_{t:g}_s": tta_(pts, t) for t in targets})
            row["final_accuracy_mean"] = final
            out.append(row)
    out.sort(key=lambda r: (r["study"], r["mode"], r["k"]))
    with open(f"{claim}/studies.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(out[0]))
        w.writeheader()
        w.writerows(out)
    sys.exit(0)
real_out, scale_out, repeats, scale_seeds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def runs_dir(tag):  # tags are KIND_N_MODE...: 4 workers in REAL_DIR/runs, 32 and 256 in SCALE_DIR/runs
    return f"{real_out if tag.split('_')[1] == '4' else scale_out}/runs"
def curve(tag, path=None):
    rows = list(csv.reader(open(path or f"{runs_dir(tag)}/curve_{tag}.csv")))[1:]
    return [(float(t), float(a)) for t, a in rows]
# Time to accuracy: the first grid time at which the mean worker accuracy, averaged over the
# last 4 grid points (1 s at N = 4), reaches the target. A single point crosses early by SGD
# noise (a few tenths of a point on 2000 test digits); the trailing window does not.
def tta(points, target, window=4):
    for k in range(window - 1, len(points)):
        if sum(a for _, a in points[k - window + 1 : k + 1]) / window >= target:
            return points[k][0]
    return math.inf
def summary(tag):
    s = json.load(open(f"{runs_dir(tag)}/summary_{tag}.json"))
    idle = s.get("mean_idle_fraction")
    if idle is None:
        idle = sum(w["idle_fraction"] for w in s["per_worker"]) / len(s["per_worker"])
    return s, idle
modes = ["allreduce", "preduce_p2", "preduce_p3", "preduce_p2_blocking", "preduce_p3_blocking", "adpsgd", "eager",
         "allreduce_homogeneous"]
show = lambda t: "" if t == math.inf else round(t, 3)
rows = []
for kind, n, targets in (("real", 4, (0.95, 0.94)), ("sim", 4, (0.95, 0.94)), ("sim", 32, (0.9,)), ("sim", 256, (0.9,))):
    # Real: repeats of seed 1; simulated N = 4: one run (seed 1, as the real runs); N = 32, 256: seeds.
    runs = ([f"_r{r}" for r in range(1, repeats + 1)] if kind == "real"
            else [""] if n == 4 else [f"_s{seed}" for seed in range(1, scale_seeds + 1)])
    tags = {m: [f"{kind}_{n}_{m}{run}" for run in runs] for m in modes}
    for target in targets:
        base = None
        for mode in modes:
            if not all(os.path.exists(f"{runs_dir(t)}/summary_{t}.json") for t in tags[mode]):
                continue
            times = [tta(curve(t), target) for t in tags[mode]]
            t = statistics.median(times)
            if mode == "allreduce":
                base = t
            stats = [summary(t) for t in tags[mode]]
            med = lambda f: statistics.median(f(s, idle) for s, idle in stats)
            rows.append(dict(kind=kind, workers=n, mode=mode, target=target, time_to_target_s=show(t),
                             repeats=" ".join(str(show(x)) or "-" for x in times),
                             speedup_vs_allreduce="" if t == math.inf or base in (None, math.inf) else round(base / t, 3),
                             final_accuracy_mean=round(med(lambda s, i: s["final_accuracy_mean"]), 4),
                             average_model_accuracy=round(med(lambda s, i: s["average_model_accuracy"]), 4),
                             wall_s=round(med(lambda s, i: s["wall_s"]), 2), mean_idle_fraction=round(med(lambda s, i: i), 3)))
# Simulator error at N = 4 against the real median (same target).
real = {(r["mode"], r["target"]): r["time_to_target_s"] for r in rows if r["kind"] == "real"}
for r in rows:
    ref = real.get((r["mode"], r["target"]))
    ok = r["kind"] == "sim" and r["workers"] == 4 and ref not in (None, "") and r["time_to_target_s"] != ""
    r["sim_error_vs_real"] = round((r["time_to_target_s"] - ref) / ref, 3) if ok else ""
cols = list(rows[0].keys())
for d, part in ((real_out, [r for r in rows if r["workers"] == 4]), (scale_out, [r for r in rows if r["workers"] != 4])):
    if part:
        with open(f"{d}/results.csv", "w") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            w.writerows(part)
print("# N=4 simulation costs measured per mode on the real ranks:")
for line in open(f"{real_out}/runs/calibration.txt"):
    print("#   " + line.strip())
print(" ".join(f"{c:>20}" for c in cols))
for r in rows:
    print(" ".join(f"{str(r[c]):>20}" for c in cols))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # Left: time to the target per mode, median (bar) and each repeat or seed (dots); then the
    # curves of one run per mode. 4 ranks (repeats, and repeat 1's curves beside the simulated
    # N = 4 run); the simulator at 32 and 256 workers (seeds, with the larger groups of
    # runs/group_size/ where they exist; seed 1's curves at 256).
    def group_tags(n, runs):
        return {f"preduce_p{p}": [f"{scale_out}/runs/group_size/curve_n{n}_p{p}{r}.csv" for r in runs] for p in (4, 8)}
    def tta_panel(ax, kind, n, runs, target, title):
        series = {m: [f"{runs_dir(f'{kind}_{n}_{m}')}/curve_{kind}_{n}_{m}{r}.csv" for r in runs] for m in modes}
        if n != 4:
            series.update(group_tags(n, runs))
        names, meds = [], []
        for m, paths in series.items():
            if not all(os.path.exists(p) for p in paths):
                continue
            times = [tta(curve(None, p), target) for p in paths]
            finite = [t for t in times if t != math.inf]
            names.append(m)
            meds.append(statistics.median(times))
            i = len(names) - 1
            ax.bar(i, meds[-1] if meds[-1] != math.inf else 0, color="tab:blue" if "preduce" in m else "tab:gray")
            ax.plot([i] * len(finite), finite, "k.", ms=4)
            top = max(finite + [meds[-1] if meds[-1] != math.inf else 0])
            ax.annotate(show(meds[-1]) if meds[-1] != math.inf else "never", (i, top),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 3), textcoords="offset points")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=40, ha="right", fontsize=7)
        ax.set_ylabel(f"time to {target:.0%} (s{'' if kind == 'real' else ', modelled'})")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    def curve_panel(ax, kind, n, suffix, target, title):
        for mode in modes:
            tag = f"{kind}_{n}_{mode}{suffix}"
            if os.path.exists(f"{runs_dir(tag)}/curve_{tag}.csv"):
                pts = curve(tag)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=mode, lw=1)
        for m, (path,) in (group_tags(n, [suffix]).items() if n != 4 else ()):
            if os.path.exists(path):
                pts = curve(None, path)
                ax.plot([q[0] for q in pts], [q[1] for q in pts], label=m, lw=1, ls="--")
        ax.set_ylim(target - 0.07, target + 0.02)
        ax.axhline(target, color="gray", lw=0.5)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("time (s)" if kind == "real" else "modelled time (s)")
        ax.set_ylabel("mean worker test accuracy")
        ax.legend(fontsize=6)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    tta_panel(axes[0], "real", 4, [f"_r{r}" for r in range(1, repeats + 1)], 0.95,
              f"MNIST MLP, 4 ranks (one 4x slower): median of {repeats} repeats")
    curve_panel(axes[1], "real", 4, "_r1", 0.95, "4 ranks, repeat 1")
    curve_panel(axes[2], "sim", 4, "", 0.95, "4 workers, simulated with each mode's measured costs")
    fig.tight_layout()
    fig.savefig(f"{real_out}/tta.png", dpi=90)
    if os.path.exists(f"{scale_out}/runs"):
        seeds = [f"_s{seed}" for seed in range(1, scale_seeds + 1)]
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        for ax, n in zip(axes, (32, 256)):
            tta_panel(ax, "sim", n, seeds, 0.90,
                      f"784-32-10 MLP, {n} workers (every 4th 4x slower): median of {scale_seeds} seeds")
        curve_panel(axes[2], "sim", 256, "_s1", 0.90, "256 workers, seed 1")
        fig.tight_layout()
        fig.savefig(f"{scale_out}/tta.png", dpi=90)
except ImportError:
    print("# matplotlib not available: no plot")
