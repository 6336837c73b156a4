#!/usr/bin/env bash
# The paper-scale part of scripts/reproduce_flexmoe.sh (issue 35, items 3 and 5), run by it into
# its run directory; not meant to be run alone. Usage: reproduce_flexmoe_scale.sh OUT_DIR SIM
# [placement_sim flags]. Writes to OUT_DIR (the claim folder results/moe/scale's run copy):
#   heldout.csv      every held-out scenario of heldout.txt (fixed before tuning), both exchange
#                    schedules: each policy's mean step and FlexMoE's speedups, plan statistics
#   noharm.csv       8-64 tokens per GPU: flexmoe against static, plan statistics
#   scaling.csv      step time vs GPUs per policy (a100 cluster, 1 expert a GPU, 4096 tokens,
#                    Zipf 0.6), both schedules;  step_vs_gpus.png its plot
#   plans.png        per-plan predicted vs realised net gain of the held-out runs, both schedules
#   prediction.csv   per-plan prediction of the held-out scenarios at slower drifts, and at the
#                    held-out drift with the present load known exactly (its bound, see below)
#   tables.md        the tables of the README, generated
#   runs/            each run's summary JSON and plan log
# SMOKE=1: 3 held-out lines, 20 iterations, scaling at 8 and 16 GPUs (not a measurement).
set -euo pipefail
out=$1 sim=$2
shift 2
runs=$out/runs
rm -rf "$runs"  # the claim folder's copy: only this run's runs may be tabulated (a smoke runs fewer)
mkdir -p "$runs"
iterations=120 scaling=(8 16 32 64 128 256) heldout_lines=1000 heldout_drift=0.05 study_drifts=(0 0.005 0.01 0.02)
futures=100
if [[ ${SMOKE:-0} == 1 ]]; then
  iterations=20 scaling=(8 16) heldout_lines=3 study_drifts=(0) futures=10
fi
config_of() { [[ $1 == h200 ]] && echo configs/sim_h200.ini || echo configs/sim_64gpu.ini; }

# One scenario: NAME CLUSTER GPUS EXPERTS_PER_GPU D_MODEL TOKENS ZIPF SEED DRIFT -> runs/NAME.json
run_cell() {
  local name=$1 cluster=$2 gpus=$3 epg=$4 d=$5 tokens=$6 zipf=$7 seed=$8 drift=$9
  shift 9
  "$sim" --config "$(config_of "$cluster")" --sim.scaling= --sim.gpus="$gpus" --sim.experts_per_gpu="$epg" \
    --sim.hidden="$d" --sim.ffn_hidden=$((4 * d)) --sim.tokens_per_gpu="$tokens" --sim.zipf="$zipf" \
    --sim.seed="$seed" --sim.drift="$drift" --sim.iterations="$iterations" --output.plans="$runs/$name.plans.jsonl" \
    "$@" | tail -n 1 >"$runs/$name.json"
}

# Every held-out scenario as PREFIX_<cell> at DRIFT, with the extra flags: PREFIX DRIFT [flags].
# Each plan is also scored on other futures of its trace (sim.plan_futures): how well the best
# prediction possible at the plan could have done.
run_heldout() {
  local prefix=$1 drift=$2
  shift 2
  grep -v '^#' "$out/heldout.txt" | head -n "$heldout_lines" | while read -r cluster gpus epg d tokens zipf seed; do
    run_cell "${prefix}_${cluster}_${gpus}g_${epg}e_d${d}_t${tokens}_z${zipf}_s${seed}" \
      "$cluster" "$gpus" "$epg" "$d" "$tokens" "$zipf" "$seed" "$drift" --sim.plan_futures="$futures" "$@"
  done
}

run_heldout heldout "$heldout_drift" "$@"
# The per-plan prediction study: the held-out scenarios at slower drifts, and at the held-out
# drift with the present load known exactly (no sampling noise, the estimate the last counts):
# what that still misses is the routing's reordering within a plan's horizon, which no estimate
# of the present load foresees.
for drift in "${study_drifts[@]}"; do
  run_heldout "drift${drift}" "$drift" "$@"
done
run_heldout exact "$heldout_drift" --sim.noise=0 --placement.smoothing=0 "$@"
for tokens in 8 64; do
  for zipf in 0.6 1.0; do
    run_cell "noharm_a100_8g_2e_d1024_t${tokens}_z${zipf}_s1" a100 8 2 1024 "$tokens" "$zipf" 1 "$heldout_drift" "$@"
  done
done
for gpus in "${scaling[@]}"; do
  run_cell "scaling_a100_${gpus}g_1e_d1024_t4096_z0.6_s1" a100 "$gpus" 1 1024 4096 0.6 1 "$heldout_drift" "$@"
done
/usr/bin/python3 - "$out" "$futures" "$heldout_drift" "${study_drifts[@]}" <<'PY'
import csv, glob, json, os, statistics, sys
out = sys.argv[1]
POLICIES = ["static", "deepspeed", "fastermoe", "flexmoe", "ideal"]

def cells(prefix):
    rows = []
    for path in sorted(glob.glob(f"{out}/runs/{prefix}_*.json")):
        name = os.path.basename(path)[:-5]
        cluster, gpus, epg, d, tokens, zipf, seed = name.split("_")[1:]
        j = json.load(open(path))
        p = j["flexmoe_plans"]
        row = dict(cell=name, cluster=cluster, gpus=int(gpus[:-1]), experts_per_gpu=int(epg[:-1]), d_model=int(d[1:]),
                   tokens_per_gpu=int(tokens[1:]), zipf=float(zipf[1:]), seed=int(seed[1:]), plans=p["plans"],
                   changes_per_100=p["replica_changes_per_100_iterations"],
                   median_lifetime=p["median_replica_lifetime"], predicted_gain_ms=p["predicted_gain_ms"],
                   realised_gain_ms=p["realised_gain_ms"], predicted_net_ms=p["predicted_net_ms"],
                   realised_net_ms=p["realised_net_ms"])
        for overlap in ("none", "pipelined"):
            ms = j[f"step_ms_{overlap}"]
            for pol in POLICIES:
                row[f"{overlap}_{pol}_ms"] = ms[pol]
            row[f"{overlap}_vs_fastermoe"] = ms["fastermoe"] / ms["flexmoe"]
            row[f"{overlap}_vs_deepspeed"] = ms["deepspeed"] / ms["flexmoe"]
            row[f"{overlap}_vs_static"] = ms["static"] / ms["flexmoe"]
            row[f"{overlap}_over_ideal"] = ms["flexmoe"] / ms["ideal"]
        rows.append(row)
    return rows

def write_csv(name, rows):
    with open(f"{out}/{name}", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

def fmt(x, nd=2):
    return f"{x:.{nd}f}"

tables = []
held = cells("heldout")
write_csv("heldout.csv", held)
for overlap in ("none", "pipelined"):
    tables.append(f"### Held-out scenarios, overlap {overlap}\n")
    tables.append("| cluster | GPUs | experts/GPU | d_model | tokens/GPU | Zipf | static ms | deepspeed ms | fastermoe ms | "
                  "flexmoe ms | ideal ms | vs fastermoe | vs deepspeed | flexmoe/ideal |")
    tables.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in held:
        tables.append("| " + " | ".join([r["cluster"], str(r["gpus"]), str(r["experts_per_gpu"]), str(r["d_model"]),
                                         str(r["tokens_per_gpu"]), str(r["zipf"])] +
                                        [fmt(r[f"{overlap}_{p}_ms"], 3) for p in POLICIES] +
                                        [fmt(r[f"{overlap}_vs_fastermoe"]) + "x", fmt(r[f"{overlap}_vs_deepspeed"]) + "x",
                                         fmt(r[f"{overlap}_over_ideal"])]) + " |")
    for label, sel in (("64 GPUs, 4096+ tokens/GPU", lambda r: r["gpus"] == 64 and r["tokens_per_gpu"] >= 4096),
                       ("all held-out", lambda r: True)):
        sub = [r for r in held if sel(r)]
        if sub:
            tables.append(f"\n{label} ({len(sub)} scenarios), mean speedup: flexmoe over fastermoe "
                          f"{fmt(statistics.mean(r[f'{overlap}_vs_fastermoe'] for r in sub))}x (paper 1.30x), over "
                          f"deepspeed dropless {fmt(statistics.mean(r[f'{overlap}_vs_deepspeed'] for r in sub))}x "
                          f"(paper 1.70x)\n")
def plan_lines(overlap, prefix="heldout"):
    for path in sorted(glob.glob(f"{out}/runs/{prefix}_*.plans.jsonl")):
        for line in open(path):
            p = json.loads(line)
            # Plans that moved replicas (others only re-levelled shares, which the runtime does anyway).
            if p["overlap"] == overlap and p["realised_iterations"] > 0 and p["replicas_added"] + p["replicas_removed"]:
                yield p

# Each plan's net gain over the iterations until the next plan (the counterfactual of the counts
# that followed, less its moves) against its prediction on the load estimate.
def plan_accuracy(overlap, prefix="heldout"):
    plans = list(plan_lines(overlap, prefix))
    positive = [p for p in plans if p["predicted_net_s"] > 0]
    errors = [abs(p["realised_net_s"] / p["predicted_net_s"] - 1) for p in positive]
    nan = float("nan")
    return dict(plans=len(plans), predicted_ms=sum(p["predicted_net_s"] for p in plans) * 1e3,
                realised_ms=sum(p["realised_net_s"] for p in plans) * 1e3, positive=len(errors),
                within=sum(e <= 0.25 for e in errors), median_error=statistics.median(errors) if errors else nan,
                worst_error=max(errors) if errors else nan,
                futures_within=statistics.mean(p["futures_within"] for p in positive) if positive else nan,
                best_within=statistics.mean(p["best_within"] for p in positive) if positive else nan)

for overlap in ("none", "pipelined"):
    a = plan_accuracy(overlap)
    pred, real, within, n = a["predicted_ms"], a["realised_ms"], a["within"], a["positive"]
    tables.append(f"Held-out plans, overlap {overlap}: {a['plans']} plans that moved replicas, net gain (until each next plan, less the "
                  f"moves) predicted {fmt(pred, 1)} ms, realised {fmt(real, 1)} ms (ratio "
                  f"{fmt(real / pred if pred else float('nan'))}); per plan with a positive prediction, realised "
                  f"within 25% for {within} of {n} ({fmt(100 * within / n if n else 0, 0)}%), "
                  f"median error {fmt(100 * a['median_error'], 1)}%, worst {fmt(100 * a['worst_error'], 0)}%.\n")

# The same held-out scenarios at slower drifts, and at the held-out drift with the present load
# known exactly: how far the per-plan prediction is the estimate's and how far the drift's.
futures, heldout_drift, study_drifts = sys.argv[2], sys.argv[3], sys.argv[4:]
study = [(f"drift{d}", d, "smoothed counts (the default)") for d in study_drifts]
study += [("heldout", heldout_drift, "smoothed counts (the default)"),
          ("exact", heldout_drift, "exact present load (no sampling noise, smoothing 0)")]
study_rows = []
for prefix, drift, estimate in study:
    fast = [r for r in cells(prefix) if r["gpus"] == 64 and r["tokens_per_gpu"] >= 4096]
    for overlap in ("none", "pipelined"):
        a = plan_accuracy(overlap, prefix)
        study_rows.append(dict(drift=float(drift), estimate=estimate, overlap=overlap, plans=a["plans"],
                               within_25=a["within"], positive=a["positive"], median_error=a["median_error"],
                               realised_over_predicted=a["realised_ms"] / a["predicted_ms"] if a["predicted_ms"] else float("nan"),
                               futures_within=a["futures_within"], best_within=a["best_within"],
                               vs_fastermoe=statistics.mean(r[f"{overlap}_vs_fastermoe"] for r in fast) if fast else float("nan")))
write_csv("prediction.csv", study_rows)
tables.append("### Per-plan prediction against the routing's drift (held-out scenarios)\n")
tables.append(f"| drift | load estimate | overlap | plans | within 25% | median error | summed realised / predicted | "
              f"within 25% over {futures} other futures: flexmoe's prediction / the best possible | "
              "flexmoe / fastermoe (64 GPUs, 4096+ tokens) |")
tables.append("|---|---|---|---|---|---|---|---|---|")
for r in study_rows:
    share = 100 * r["within_25"] / r["positive"] if r["positive"] else 0
    tables.append(f"| {r['drift']:g} | {r['estimate']} | {r['overlap']} | {r['plans']} | {r['within_25']} of {r['positive']} "
                  f"({fmt(share, 0)}%) | {fmt(100 * r['median_error'], 1)}% | {fmt(r['realised_over_predicted'])} | "
                  f"{fmt(100 * r['futures_within'], 0)}% / {fmt(100 * r['best_within'], 0)}% | {fmt(r['vs_fastermoe'])}x |")
tables.append("")
harm = cells("noharm")
write_csv("noharm.csv", harm)
tables.append("### No harm at 8-64 tokens per GPU (a100, 8 GPUs, 2 experts each)\n")
tables.append("| tokens/GPU | Zipf | overlap | static ms | flexmoe ms | flexmoe/static | replica changes per 100 it | "
              "median replica lifetime (it) |")
tables.append("|---|---|---|---|---|---|---|---|")
for r in harm:
    for overlap in ("none", "pipelined"):
        tables.append(f"| {r['tokens_per_gpu']} | {r['zipf']} | {overlap} | {fmt(r[f'{overlap}_static_ms'], 3)} | "
                      f"{fmt(r[f'{overlap}_flexmoe_ms'], 3)} | {fmt(1 / r[f'{overlap}_vs_static'], 3)} | "
                      f"{fmt(r['changes_per_100'], 1)} | {r['median_lifetime'] if r['median_lifetime'] >= 0 else '-'} |")
scale = sorted(cells("scaling"), key=lambda r: r["gpus"])
write_csv("scaling.csv", scale)
tables.append("\n### Step time vs GPUs (a100, 1 expert/GPU, 4096 tokens/GPU, Zipf 0.6, seed 1)\n")
tables.append("| GPUs | overlap | " + " | ".join(f"{p} ms" for p in POLICIES) + " | vs fastermoe | vs deepspeed |")
tables.append("|---|---|" + "---|" * (len(POLICIES) + 2))
for r in scale:
    for overlap in ("none", "pipelined"):
        tables.append(f"| {r['gpus']} | {overlap} | " + " | ".join(fmt(r[f'{overlap}_{p}_ms'], 3) for p in POLICIES) +
                      f" | {fmt(r[f'{overlap}_vs_fastermoe'])}x | {fmt(r[f'{overlap}_vs_deepspeed'])}x |")
open(f"{out}/tables.md", "w").write("\n".join(tables) + "\n")
print("\n".join(tables))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
for ax, overlap in zip(axes, ("none", "pipelined")):
    for p in POLICIES:
        ax.plot([r["gpus"] for r in scale], [r[f"{overlap}_{p}_ms"] for r in scale], marker="o", label=p)
    ax.set_xscale("log", base=2); ax.set_xlabel("GPUs"); ax.set_title(f"overlap {overlap}"); ax.grid(alpha=0.3)
axes[0].set_ylabel("step ms (expert part, 2 layers)"); axes[0].legend()
fig.tight_layout(); fig.savefig(f"{out}/step_vs_gpus.png", dpi=110)
fig, axes = plt.subplots(1, 2, figsize=(10, 5))
for ax, overlap in zip(axes, ("none", "pipelined")):
    xs = [p["predicted_net_s"] * 1e3 for p in plan_lines(overlap)]
    ys = [p["realised_net_s"] * 1e3 for p in plan_lines(overlap)]
    ax.scatter(xs, ys, s=8)
    if xs:
        hi = max(max(xs), max(ys)); lo = min(min(xs), min(ys), 0)
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
        ax.plot([lo, hi], [0.75 * lo, 0.75 * hi], color="grey", linewidth=0.5, linestyle="--")
        ax.plot([lo, hi], [1.25 * lo, 1.25 * hi], color="grey", linewidth=0.5, linestyle="--")
    ax.set_xscale("symlog", linthresh=1); ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel("predicted net gain until the next plan (ms)"); ax.set_ylabel("realised net gain (ms)")
    ax.set_title(f"held-out plans, overlap {overlap} (dashed: 25%)"); ax.grid(alpha=0.3)
fig.tight_layout(); fig.savefig(f"{out}/plans.png", dpi=110)
print(f"plots: {out}/step_vs_gpus.png {out}/plans.png")
PY
