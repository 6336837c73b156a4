#!/usr/bin/env python3
"""Tables of scripts/bench_preduce_scale.sh (issue 37, items 4-5).

  preduce_scale_report.py tune OUT N     runs/nN/dev/*.json -> dev_nN.csv (mean time to target
                                         per variant over the development set) and tuned_nN.txt
                                         ("FAMILY VARIANT": each mode's variant with the lowest
                                         mean over the whole set, among those run on all of it)
  preduce_scale_report.py heldout OUT N  runs/nN/heldout/*.json -> results_nN.csv and
                                         results_nN.md (time to target per scenario and mode;
                                         best tuned baseline / P-Reduce, mean and worst)

Time to target and censoring as scripts/preduce_hetero_report.py's load() (one reading of the
summaries for both studies).
"""
import csv, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from preduce_hetero_report import load, models_of  # noqa: E402

# Row families: the paper's blocking P-Reduce, the project's overlap+refresh variant, baselines.
OURS = ("preduce_blocking", "preduce_overlap")
BASELINES = ("allreduce", "adpsgd", "eager")
NAMES = {"preduce_blocking": "P-Reduce (paper, blocking)", "preduce_overlap": "P-Reduce (overlap+refresh)",
         "allreduce": "all-reduce", "adpsgd": "AD-PSGD", "eager": "eager-SGD"}


def family(variant):
    return next(f for f in OURS + BASELINES if variant.startswith(f + "_") or variant == f)


def seeds_of(set_file):
    return [int(x) for line in open(set_file) if line.startswith("seeds ") for x in line.split()[1:]]


def tune(out, n):
    table = load(f"{out}/runs/n{n}/dev")
    models = sorted({m for m, _ in table})
    seeds = sorted({s for runs in table.values() for s in runs})
    complete = sorted(v for v in {v for _, v in table} if all(s in table.get((m, v), {}) for m in models for s in seeds))
    mean = {v: statistics.fmean(table[(m, v)][s][0] for m in models for s in seeds) for v in complete}
    with open(f"{out}/dev_n{n}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "mean_tta_s", "censored_runs"] + [f"{m}_s" for m in models])
        for v in sorted(complete, key=mean.get):
            w.writerow([v, f"{mean[v]:.3f}", sum(table[(m, v)][s][1] for m in models for s in seeds)]
                       + [f"{statistics.fmean(table[(m, v)][s][0] for s in seeds):.3f}" for m in models])
    with open(f"{out}/tuned_n{n}.txt", "w") as f:
        for fam in BASELINES + OURS:
            best = min((v for v in complete if family(v) == fam), key=mean.get)
            print(f"tuned {fam}: {best} ({mean[best]:.3f} s over {len(models)} dev scenarios)")
            f.write(f"{fam} {best}\n")


def heldout(out, n):
    table = load(f"{out}/runs/n{n}/heldout")
    tuned = dict(line.split() for line in open(f"{out}/tuned_n{n}.txt"))
    models = [m for m in models_of(f"{out}/heldout.txt") if any((m, v) in table for v in tuned.values())]
    seeds = sorted({s for runs in table.values() for s in runs})
    cell = {}
    for m in models:
        for fam, v in tuned.items():
            runs = table[(m, v)]
            missing = [s for s in seeds if s not in runs]
            assert not missing, f"{m} {v}: no run for seeds {missing}"
            cell[(m, fam)] = (statistics.fmean(runs[s][0] for s in seeds), sum(runs[s][1] for s in seeds))
    best_base = {m: min(BASELINES, key=lambda f: cell[(m, f)][0]) for m in models}
    ratio = {(m, o): cell[(m, best_base[m])][0] / cell[(m, o)][0] for m in models for o in OURS}
    with open(f"{out}/results_n{n}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workers", "scenario", "mode", "variant", "seeds", "mean_tta_s", "censored_runs",
                    "best_baseline", "best_baseline_over_mode"])
        for m in models:
            for fam in BASELINES + OURS:
                w.writerow([n, m, fam, tuned[fam], len(seeds), f"{cell[(m, fam)][0]:.3f}", cell[(m, fam)][1],
                            best_base[m], f"{ratio[(m, fam)]:.3f}" if fam in OURS else ""])
    cols = BASELINES + OURS
    lines = [f"Held-out scenarios, {n} simulated workers, seeds {' '.join(map(str, seeds))}: mean virtual "
             "seconds to 90% (* = some seed never reached it and counts as the run's length); "
             "ratio = best tuned baseline / P-Reduce (> 1: P-Reduce faster).", "",
             "| scenario | " + " | ".join(f"{NAMES[f]} `{tuned[f]}`" for f in cols)
             + " | best baseline | ratio, blocking | ratio, overlap+refresh |",
             "|" + "---|" * (len(cols) + 4)]
    for m in models:
        lines.append(f"| {m} | " + " | ".join(f"{cell[(m, f)][0]:.2f}" + ("*" if cell[(m, f)][1] else "") for f in cols)
                     + f" | {NAMES[best_base[m]]} | {ratio[(m, OURS[0])]:.2f} | {ratio[(m, OURS[1])]:.2f} |")
    for label, agg in (("mean", statistics.fmean), ("worst", min)):
        lines.append(f"| **{label}** |" + " |" * len(cols) + " | "
                     + " | ".join(f"**{agg(ratio[(m, o)] for m in models):.2f}**" for o in OURS) + " |")
    open(f"{out}/results_n{n}.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    {"tune": tune, "heldout": heldout}[sys.argv[1]](sys.argv[2], int(sys.argv[3]))
