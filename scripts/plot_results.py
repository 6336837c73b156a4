#!/usr/bin/python3
"""Plots (and small tables) for the claim folders under results/ that have no plot of their own.

Each subcommand reads the CSV(s) in a claim folder and writes one PNG next to them; it changes
no measured number (tabulate-* only copies fields from the per-run JSON lines into a CSV).

  scripts/plot_results.py wide-criteo results/wide/fm_criteo     # bench_criteo_*.csv -> throughput.png
  scripts/plot_results.py wide-spam results/wide/spam_throughput # bench_spam.csv -> throughput.png
  scripts/plot_results.py wide-tta results/wide/spam_time_to_auc # spam_liblinear.csv -> time_to_auc.png
  scripts/plot_results.py gemm results/gemm/bf16_gemm            # bench_cooperlake_run*.csv -> gflops.png
  scripts/plot_results.py tabulate-moe-precision results/moe/precision   # runs/*.json -> precision.csv
  scripts/plot_results.py moe-precision results/moe/precision    # precision.csv -> step_ms.png
  scripts/plot_results.py moe-bench results/moe/skew_8experts    # bench_moe*.csv -> modelled_step.png
  scripts/plot_results.py tabulate-sim-validation results/moe/sim_64gpu  # runs/sim_validation_*.json -> validation.csv
  scripts/plot_results.py choose-moe-target results/moe/models gpt  # runs/gpt_static.jsonl -> runs/gpt_target.json
  scripts/plot_results.py tabulate-moe-models results/moe/models  # runs/ -> ttq.csv, quality.csv, balance.csv, sim.csv
  scripts/plot_results.py moe-models results/moe/models          # quality.csv -> quality_<model>.png
  scripts/plot_results.py all                                    # every folder above

Needs matplotlib (scripts/setup.sh --bench installs python3-matplotlib).
"""
import csv
import glob
import json
import os
import statistics
import sys


def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as p

    return p


def rows(path):
    return list(csv.DictReader(open(path)))


def bars(ax, labels, values, fmt="%.3g", color=None):
    b = ax.bar(range(len(values)), values, color=color)
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, fontsize=8)
    for rect, v in zip(b, values):
        ax.annotate(fmt % v, (rect.get_x() + rect.get_width() / 2, rect.get_height()), ha="center", va="bottom",
                    fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def wide_criteo(d):
    (path,) = glob.glob(f"{d}/bench_criteo_*.csv")
    r = rows(path)
    model = "FM k=16" if r[0]["model"] == "fm" else "LR"
    p = plt()
    fig, (a, b) = p.subplots(1, 2, figsize=(9, 3.6))
    labels = [f"{x['schema']}\n{x['ids']}" for x in r]
    bars(a, labels, [float(x["samples_per_s"]) / 1e3 for x in r], "%.0fk")
    a.set_ylabel("samples/s (thousands)")
    a.set_title(f"{model}, 1M rows, 2^22 features, 2 threads", fontsize=9)
    bars(b, labels, [float(x["ratio_vs_classical"]) for x in r], "%.2fx", color="tab:orange")
    b.axhline(2, color="gray", ls="--", lw=1, label="target 2x")
    b.set_ylabel("over classical (original ids)")
    b.set_title("wall-time ratio (median of 3)", fontsize=9)
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{d}/throughput.png", dpi=100)


def wide_spam(d):
    r = rows(f"{d}/bench_spam.csv")
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(9, 3.6))
    for ax, model, name in zip(axes, ("lr", "fm"), ("LR", "FM k=16")):
        m = [x for x in r if x["model"] == model]
        bars(ax, [f"{x['schema']}\n{x['ids']}\n{float(x['ratio_vs_classical']):.2f}x" for x in m],
             [float(x["samples_per_s"]) / 1e3 for x in m], "%.1fk")
        ax.set_ylabel("samples/s (thousands)")
        ax.set_title(f"{name}, SpamAssassin, batch 512, 2 threads, median of 5", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{d}/throughput.png", dpi=100)


def wide_tta(d):
    r = rows(f"{d}/spam_liblinear.csv")
    p = plt()
    fig, ax = p.subplots(figsize=(6, 3.6))
    labels = [f"{x['tool']}\n{x['schema']}\nAUC {float(x['test_auc']):.4f}" for x in r]
    bars(ax, labels, [float(x["seconds_to_liblinear_auc"]) for x in r], "%.3f s")
    ax.set_ylabel("seconds to liblinear's test AUC")
    ax.set_title("LR on SpamAssassin: time to AUC %.3f (parsing included)" % float(r[0]["test_auc"]), fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{d}/time_to_auc.png", dpi=100)


def gemm(d):
    runs = [rows(p) for p in sorted(glob.glob(f"{d}/bench_cooperlake_run*.csv"))]
    shapes = [x["shape"] for x in runs[0]]
    med = lambda k: [statistics.median(float(run[i][k]) for run in runs) for i in range(len(shapes))]
    sg, bf, ratio = med("sgemm_gflops"), med("bf16_gflops"), med("bf16_over_sgemm")
    peak = statistics.median(float(run[0]["bf16_peak_gflops"]) for run in runs)
    p = plt()
    fig, ax = p.subplots(figsize=(12, 4.5))
    x = range(len(shapes))
    ax.bar([i - 0.2 for i in x], sg, 0.4, label="OpenBLAS SGEMM (AVX-512, Cooperlake kernels)")
    ax.bar([i + 0.2 for i in x], bf, 0.4, label="bf16 AVX512-BF16 kernel")
    for i, r in zip(x, ratio):
        ax.annotate("%.2fx" % r, (i + 0.2, bf[i]), ha="center", va="bottom", fontsize=7)
    ax.axhline(peak, color="gray", ls="--", lw=1, label="vdpbf16ps peak %.0f GFLOP/s" % peak)
    ax.set_xticks(list(x))
    ax.set_xticklabels(shapes, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("GFLOP/s, one core (median of 3 runs)")
    ax.set_title("bf16 GEMM vs SGEMM on moe_train's shapes", fontsize=10)
    ax.set_ylim(0, peak * 1.2)
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(f"{d}/gflops.png", dpi=100)


# precision runs: runs/<label>_r<repeat>.json, the summary line of each moe_train run
PRECISION = (("fp32-avx2", "fp32, AVX2 SGEMM"), ("fp32-avx512", "fp32, AVX-512 SGEMM"), ("bf16", "bf16"))


def tabulate_moe_precision(d):
    out = []
    for path in sorted(glob.glob(f"{d}/runs/*_r*.json")):
        label, rep = os.path.basename(path)[:-5].rsplit("_r", 1)
        s = json.loads(open(path).read())
        build = "before" if label.startswith("before_gelu_") else "now"
        prec = label.removeprefix("before_gelu_")
        out.append(dict(build=build, precision=prec, repeat=int(rep), step_s=s["step_s"], tokens_per_s=s["tokens_per_s"],
                        final_loss=s["final_loss"], final_val_loss=s["final_val_loss"], iterations=s["iterations"],
                        ranks=s["ranks"], policy=s["policy"]))
    out.sort(key=lambda r: (r["build"] != "before", r["precision"], r["repeat"]))
    with open(f"{d}/precision.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(out[0]))
        w.writeheader()
        w.writerows(out)


def moe_precision(d):
    r = [x for x in rows(f"{d}/precision.csv") if x["build"] == "now"]
    labels, steps, val = [], [], []
    for key, name in PRECISION:
        m = [x for x in r if x["precision"] == key]
        labels.append(name)
        steps.append(statistics.median(float(x["step_s"]) * 1e3 for x in m))
        val.append(statistics.median(float(x["final_val_loss"]) for x in m))
    p = plt()
    fig, ax = p.subplots(figsize=(6, 3.6))
    bars(ax, [f"{n}\nval loss {v:.3f}" for n, v in zip(labels, val)], steps, "%.1f ms")
    ax.set_ylabel("mean step (ms), median of 3 repeats")
    ax.set_title("moe_train, configs/moe_bench.ini, 2 ranks, 60 iterations", fontsize=9)
    fig.tight_layout()
    fig.savefig(f"{d}/step_ms.png", dpi=100)


def tabulate_sim_validation(d):
    """runs/sim_validation_<policy>[_calibrated].json (placement_sim --sim.validate) -> validation.csv."""
    out = []
    for path in sorted(glob.glob(f"{d}/runs/sim_validation_*.json")):
        run = os.path.basename(path)[len("sim_validation_"):-5]
        s = json.loads(open(path).read())
        for term, v in s.items():
            if isinstance(v, dict) and "predicted" in v:
                out.append(dict(run=run, term=term, predicted=v["predicted"], measured=v["measured"], error=v["error"],
                                iterations=s["iterations"], gemm_flops=s["gemm_flops"],
                                alltoall_bandwidth=s["alltoall_bandwidth"]))
    with open(f"{d}/validation.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(out[0]))
        w.writeheader()
        w.writerows(out)


def moe_bench(d):
    (path,) = glob.glob(f"{d}/bench_moe*.csv")
    r = rows(path)
    p = plt()
    fig, ax = p.subplots(figsize=(9, 3.8))
    cols = (("model_rows_ms", "rows model"), ("model_cpu_ms", "CPU-time model"), ("step_ms", "wall step"))
    w = 0.27
    for j, (k, name) in enumerate(cols):
        xs = [i + (j - 1) * w for i in range(len(r))]
        vals = [float(x[k]) for x in r]
        ax.bar(xs, vals, w, label=name)
        for xx, v in zip(xs, vals):
            ax.annotate("%.1f" % v, (xx, v), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(r)))
    ax.set_xticklabels([x["policy"] for x in r], fontsize=8)
    ax.set_ylabel("ms per step (median run of 3)")
    ax.set_title(f"moe_train policies, 2 ranks, replayed trace ({os.path.basename(path)})", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(f"{d}/modelled_step.png", dpi=100)

# scripts/reproduce_flexmoe_models.sh: per model, the validation measure the target is set on
# (True: higher is better) and the unit its throughput is counted in.
MOE_MODELS = {"gpt": ("val_loss", False, "tokens/s"), "bert": ("val_loss", False, "tokens/s"),
              "swin": ("val_accuracy", True, "images/s")}
MOE_POLICIES = ("static", "deepspeed", "fastermoe", "flexmoe")


def moe_curve(d, model, policy):
    """[(iteration, training wall s so far, validation value)] of runs/<model>_<policy>.jsonl; the
    wall time is the sum of the measured step times (evaluation excluded, first step included)."""
    metric = MOE_MODELS[model][0]
    wall, curve, records = 0.0, [], [json.loads(l) for l in open(f"{d}/runs/{model}_{policy}.jsonl")]
    for r in records:
        wall += r["step_s"]
        if metric in r:
            curve.append((r["iter"], wall, r[metric]))
    return curve, records


def choose_moe_target(d, model):
    """The target from the static run alone: its validation value at the evaluation nearest 2/3 of
    its iterations; writes runs/<model>_target.json and prints the README line."""
    metric, higher, _ = MOE_MODELS[model]
    curve, records = moe_curve(d, model, "static")
    goal = 2 * len(records) / 3
    it, wall, value = min(curve, key=lambda c: abs(c[0] + 1 - goal))
    json.dump({"model": model, "metric": metric, "higher_is_better": higher, "target": value}, open(
        f"{d}/runs/{model}_target.json", "w"))
    print(f"- target {model}: {metric} {'>=' if higher else '<='} {value:.6g} (static's value at iteration {it + 1} of "
          f"{len(records)}, {wall:.1f} s of steps), fixed before the other policies ran")


def tabulate_moe_models(d):
    """runs/ of scripts/reproduce_flexmoe_models.sh -> ttq.csv, quality.csv, balance.csv, sim.csv."""
    ttq, quality, balance, sim = [], [], [], []
    measured_step = {}
    for model, (metric, higher, unit) in MOE_MODELS.items():
        target = json.load(open(f"{d}/runs/{model}_target.json"))["target"]
        for policy in MOE_POLICIES:
            curve, records = moe_curve(d, model, policy)
            summary = json.loads(open(f"{d}/runs/{model}_{policy}.json").read())
            reached = [c for c in curve if (c[2] >= target if higher else c[2] <= target)]
            per_iter = [statistics.mean(r["balance"]) for r in records]
            wall = 0.0
            for r, b in zip(records, per_iter):
                wall += r["step_s"]
                balance.append(dict(model=model, policy=policy, iter=r["iter"], train_wall_s=round(wall, 4), balance=b))
            quality += [dict(model=model, policy=policy, iter=i, train_wall_s=round(w, 4), metric=metric, value=v)
                        for i, w, v in curve]
            if unit == "tokens/s":
                throughput = summary["tokens_per_s"]
            else:  # images: the global batch per measured step
                batch = int(read_ini(f"configs/moe_{model}_ttq.ini")["train"]["batch_size"])
                throughput = batch * summary["ranks"] / summary["step_s"]
            measured_step[(model, policy)] = summary["step_s"]
            ttq.append(dict(model=model, policy=policy, metric=metric, target=target,
                            time_to_target_s=round(reached[0][1], 3) if reached else "not reached",
                            iters_to_target=reached[0][0] + 1 if reached else "", mean_step_ms=summary["step_s"] * 1e3,
                            throughput=throughput, throughput_unit=unit, dropped_tokens=summary["dropped"],
                            mean_balance=statistics.mean(per_iter), final_balance=per_iter[-1],
                            final_quality=curve[-1][2]))
        for path in sorted(glob.glob(f"{d}/runs/{model}_sim_*.json"), key=lambda p: int(p.rsplit("_", 1)[1][:-5])):
            s = json.loads(open(path).read())
            ms = s["step_ms"]
            row = dict(model=model, gpus=s["gpus"], trace_iterations=s["iterations"], trace_balance=s["trace_balance"])
            row.update({f"sim_{p}_ms": ms[p] for p in MOE_POLICIES})
            row.update({f"sim_flexmoe_over_{p}": ms[p] / ms["flexmoe"] for p in ("static", "deepspeed", "fastermoe")})
            # The 2-rank wall-time ratios of the same model, for comparison; not simulated.
            row.update({f"measured_2rank_flexmoe_over_{p}": measured_step[(model, p)] / measured_step[(model, "flexmoe")]
                        for p in ("static", "deepspeed", "fastermoe")})
            sim.append(row)
    for name, table in (("ttq", ttq), ("quality", quality), ("balance", balance), ("sim", sim)):
        with open(f"{d}/{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, list(table[0]))
            w.writeheader()
            w.writerows(table)


def read_ini(path):
    import configparser

    c = configparser.ConfigParser(inline_comment_prefixes=("#",))
    c.read(path)
    return c


def moe_models(d):
    """quality.csv + the targets -> quality_<model>.png: validation measure against training wall
    time, a line per policy, the target dashed."""
    p = plt()
    q = rows(f"{d}/quality.csv")
    for model, (metric, _, _) in MOE_MODELS.items():
        fig, ax = p.subplots(figsize=(6.5, 4))
        for policy in MOE_POLICIES:
            pts = [(float(r["train_wall_s"]), float(r["value"])) for r in q if r["model"] == model and r["policy"] == policy]
            ax.plot(*zip(*pts), marker=".", label=policy)
        ax.axhline(json.load(open(f"{d}/runs/{model}_target.json"))["target"], color="gray", ls="--", label="target")
        ax.set_xlabel("training wall time (s, sum of measured steps), 2 ranks")
        ax.set_ylabel(metric)
        ax.set_title(f"{model}-MoE: {metric} against wall time (single run per policy)", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(f"{d}/quality_{model}.png", dpi=100)


COMMANDS = {"wide-criteo": wide_criteo, "wide-spam": wide_spam, "wide-tta": wide_tta, "gemm": gemm,
            "tabulate-moe-precision": tabulate_moe_precision, "tabulate-sim-validation": tabulate_sim_validation, "moe-precision": moe_precision, "moe-bench": moe_bench,
            "choose-moe-target": choose_moe_target, "tabulate-moe-models": tabulate_moe_models, "moe-models": moe_models}
ALL = (("wide-criteo", "results/wide/fm_criteo"), ("wide-criteo", "results/wide/lr_criteo"),
       ("wide-spam", "results/wide/spam_throughput"), ("wide-tta", "results/wide/spam_time_to_auc"),
       ("gemm", "results/gemm/bf16_gemm"), ("moe-precision", "results/moe/precision"),
       ("moe-bench", "results/moe/skew_8experts"), ("moe-bench", "results/moe/balanced_4experts"))

if __name__ == "__main__":
    if sys.argv[1:] == ["all"]:
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        for cmd, d in ALL:
            COMMANDS[cmd](d)
            print(f"plot_results: {cmd} {d}")
    elif len(sys.argv) >= 3 and sys.argv[1] in COMMANDS:
        COMMANDS[sys.argv[1]](*sys.argv[2:])
    else:
        sys.exit(__doc__)
