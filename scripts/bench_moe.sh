#!/usr/bin/env bash
# moe_train policies side by side at 2 ranks on identical traffic: a static run records the
# routing trace (aux loss off, so routing is skewed), then every policy trains the same model
# from the same seed on the same data while replaying that trace (moe.replay_trace). Reports
# tokens/s, step time (for flexmoe including planning and moving experts), the modelled
# balanced-ideal step time (the same step with expert work spread evenly: step - max_rank
# expert time + total expert time / N), rank balance max/mean, dropped and padded tokens, and
# validation loss after the fixed token budget. Each policy runs SKEW_BENCH_REPEATS times
# (default 3), the repeats interleaved across policies so background load hits all alike; the
# table holds the run with the median step time and the spread (max-min)/median over repeats.
# Wall time on a shared machine is distorted by other jobs, so beside it the table gives a
# modelled MoE time per step from what each rank measured itself: per layer, the max over ranks
# of (expert compute + bytes it sent in all-to-all, replica/shadow sync and flexmoe's moves of
# expert state / bandwidth), summed
# over layers; compute is the rank's expert FFN thread CPU time (CPU-time model) or its rows
# times one per-row cost for all runs (rows model: immune to load on the cores). The bandwidth is
# the all-to-all bandwidth flexmoe measured at start-up (median over its runs;
# SKEW_BENCH_BANDWIDTH=bytes/s overrides it), the same for every policy.
# Writes the preset's claim folder: configs/moe_bench_skew.ini -> results/moe/skew_8experts/,
# configs/moe_bench.ini -> results/moe/balanced_4experts/, configs/moe_bench_heldout.ini (the
# held-out workload of results/moe/heldout.txt) -> results/moe/heldout_brown/ (any other preset ->
# results/moe/archive/bench_<preset>/): bench_<preset>.csv (the policy table), checks.csv (the
# modelled-time constants and the ratios against the targets), per_layer.csv (per-layer terms of
# fastermoe and flexmoe) and modelled_step.png; the same as markdown goes to stdout.
# These files go to a run directory (scripts/run_dir.sh: out/bench_moe/<UTC time>/ or OUT);
# RECORD=1 replaces the claim folder with it. SMOKE=1: one repeat of 6 iterations, not a
# measurement (for tests; RECORD=1 refused).
# Usage: scripts/bench_moe.sh [configs/moe_bench*.ini] [extra moe_train flags]
#        (default configs/moe_bench.ini); SKEW_BUILD_DIR picks the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/progress.sh
run_dir_start bench_moe "SKEW_BENCH_REPEATS SKEW_BENCH_BANDWIDTH SKEW_BUILD_DIR" "$@"
build_dir=${SKEW_BUILD_DIR:-build}
app="$build_dir/apps/moe_train"
if [[ ! -x "$app" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build_dir" -j "${SKEW_JOBS:-2}" --target moe_train
fi
config=configs/moe_bench.ini
if [[ "${1:-}" == *.ini ]]; then
  config=$1
  shift
fi
preset=$(basename "$config" .ini)
preset=${preset/moe_bench/moe}  # moe_bench -> moe, moe_bench_skew -> moe_skew
repeats=${SKEW_BENCH_REPEATS:-3}
case $preset in
  moe_skew) claim=results/moe/skew_8experts ;;
  moe) claim=results/moe/balanced_4experts ;;
  moe_heldout) claim=results/moe/heldout_brown ;;
  *) claim=results/moe/archive/bench_$preset ;;
esac
out=$RUN_DIR
run_dir_claim "$claim" "$out"
smoke=()
if [[ ${SMOKE:-0} == 1 ]]; then
  repeats=1
  smoke=(--train.iterations=6 --train.eval_interval=3 --train.eval_sequences=16 --train.warmup=2)
fi
if [[ $preset == moe_heldout && ! -f data/brown/train.txt ]]; then
  scripts/fetch_data.sh brown
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config "$config" ${smoke[@]+"${smoke[@]}"} "$@")
run() {  # file stem, flags...
  local stem=$1
  shift
  progress_next "bench_moe $stem"
  mpirun --oversubscribe -np 2 "$app" --output.dir= "${common[@]}" --output.metrics="$work/$stem.jsonl" "$@" | tail -n 1 >"$work/$stem.json"
  # The machine into the run's summary; its key figures (4 significant digits) and its load.
  /usr/bin/python3 scripts/bench_record.py "$work/$stem.json" 2 "$stem" step_s tokens_per_s balance final_val_loss dropped
}
policies=("static" "deepspeed --moe.capacity_factor=1.0" "deepspeed_pad --moe.policy=deepspeed --moe.drop_tokens=false"
          "fastermoe")
"$app" --help | grep flexmoe >/dev/null && policies+=("flexmoe")
progress_begin $((1 + repeats * ${#policies[@]}))
run record --moe.save_trace="$work/trace"
names=()
for p in "${policies[@]}"; do names+=("${p%% *}"); done
for ((rep = 0; rep < repeats; ++rep)); do
  for p in "${policies[@]}"; do
    read -r name flags <<<"$p"
    [[ -z "${flags:-}" || "$flags" == --moe.capacity_factor* ]] && flags="--moe.policy=${name} ${flags:-}"
    run "$name.$rep" --moe.replay_trace="$work/trace" $flags
  done
done
/usr/bin/python3 - "$work" "$out" "$config" "$preset" "$repeats" "${names[@]}" <<'PY'
import csv, glob, json, os, statistics, sys
work, out, config, preset, repeats, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:]
runs = {n: sorted((json.loads(open(f"{work}/{n}.{r}.json").read()) for r in range(repeats)), key=lambda s: s["step_s"])
        for n in names}
bandwidth = float(os.environ.get("SKEW_BENCH_BANDWIDTH", 0)) or statistics.median(
    json.loads(open(f"{work}/flexmoe.{r}.json").read())["cost_constants"]["alltoall_bandwidth"] for r in range(repeats))

records = {(n, r): [json.loads(l) for l in open(f"{work}/{n}.{r}.jsonl")][1:] for n in names for r in range(repeats)}
# One expert cost per row for every run: the median over runs of total expert CPU / total rows.
row_cost = statistics.median(
    sum(sum(map(sum, x["per_rank"]["expert_cpu_s"])) for x in recs) / sum(sum(map(sum, x["per_rank"]["rows"])) for x in recs)
    for recs in records.values())

def modelled(n, r):
    """Means over iterations (after the first) of the modelled MoE step: per layer (each layer's
    all-to-all synchronises the ranks) the max over ranks of expert compute + bytes sent /
    bandwidth, summed over layers; compute is the rank's thread CPU time (cpu) or its rows x the
    common row cost (rows); ideal replaces each rank's compute by the mean over ranks."""
    acc = [0.0] * 4  # cpu step, cpu ideal, rows step, rows ideal
    for rec in records[(n, r)]:
        pr = rec["per_rank"]
        ranks, layers = len(pr["rows"]), len(pr["rows"][0])
        for l in range(layers):
            comm = [(pr["alltoall_bytes"][q][l] + pr["sync_bytes"][q][l] + pr["move_bytes"][q][l]) / bandwidth
                    for q in range(ranks)]
            for k, work in enumerate([[pr["expert_cpu_s"][q][l] for q in range(ranks)],
                                      [pr["rows"][q][l] * row_cost for q in range(ranks)]]):
                acc[2 * k] += max(w + c for w, c in zip(work, comm))
                acc[2 * k + 1] += sum(work) / ranks + max(comm)
    return [a / len(records[(n, r)]) for a in acc]

model = {n: [modelled(n, r) for r in range(repeats)] for n in names}
rows, summary = [], {}
for n in names:
    s = runs[n][len(runs[n]) // 2]  # the run with the median step time
    steps = [x["step_s"] for x in runs[n]]
    summary[n] = s
    m = sorted(model[n])[len(model[n]) // 2]  # the repeat with the median CPU-time model
    mr = sorted(model[n], key=lambda m: m[2])[len(model[n]) // 2]  # the repeat with the median rows model
    rows.append([n, s["tokens_per_s"], s["step_s"] * 1e3, (max(steps) - min(steps)) / s["step_s"] * 100,
                 s["ideal_step_s"] * 1e3, s["step_s"] / s["ideal_step_s"], m[0] * 1e3, m[0] / m[1], mr[2] * 1e3,
                 mr[2] / mr[3], s["balance"], s["dropped"], s["padded"], s["final_val_loss"]])
# The machine each median run was timed on (scripts/bench_record.py), beside its figures.
load_of = {n: summary[n]["machine"] for n in names}
base = rows[0][2]
head = ["policy", "tokens_per_s", "step_ms", "spread_pct", "ideal_step_ms", "step_over_ideal", "model_cpu_ms",
        "model_cpu_over_ideal", "model_rows_ms", "model_rows_over_ideal", "balance_max_over_mean", "dropped_tokens", "padded_rows", "val_loss",
        "speedup_vs_static"]
machine_head = ["load_1m", "load_5m", "load_15m", "cpu_model"]
with open(f"{out}/bench_{preset}.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(head + machine_head)
    for r in rows:
        w.writerow(r + [base / r[2]] + [load_of[r[0]][k] for k in machine_head])
loads = sorted(m["load_1m"] for m in load_of.values())
lines = [f"machine: {load_of[names[0]]['cpu_model']}, {load_of[names[0]]['cores']} cores; 1-minute load "
         f"{loads[0]:.2f} to {loads[-1]:.2f} at the end of the median runs (bench_{preset}.csv has each)", "",
         "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for r in rows:
    lines.append("| %s | %.0f | %.1f | %.0f%% | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.3f | %d | %d | %.4f | %.2fx |"
                 % tuple(r + [base / r[2]]))
text = "\n".join(lines) + "\n"
checks, layer_rows = [], []
if "flexmoe" in summary:
    # Ratios within each repeat (the policies of one repeat ran back to back under similar
    # background load), then the median over repeats, with the range.
    rep = {n: [json.loads(open(f"{work}/{n}.{r}.json").read()) for r in range(repeats)] for n in names}
    def ratio(label, fn, fmt="%.2f"):
        v = sorted(fn(r) for r in range(repeats))
        return (label, (fmt + " (range " + fmt + " - " + fmt + ")") % (statistics.median(v), v[0], v[-1]))
    step = lambda n, r: rep[n][r]["step_s"]
    mstep = lambda n, r: model[n][r][0]
    f, st = summary["flexmoe"], summary["static"]
    # Rows model: identical repeats for fixed policies; flexmoe's plans follow the constants it
    # measures at start-up, so its repeats can differ: the repeat with the median, as in the table.
    rmed = lambda n: sorted(model[n], key=lambda m: m[2])[len(model[n]) // 2]
    rw = lambda n: rmed(n)[2]
    rrep = lambda n, r: model[n][r][2]
    checks = [
        ("rows model: flexmoe / its balanced ideal (target <= 1.15)", "%.2f" % (rw("flexmoe") / rmed("flexmoe")[3])),
        ("rows model: deepspeed (drop_tokens=false) / flexmoe (target >= 1.5)", "%.2f" % (rw("deepspeed_pad") / rw("flexmoe"))),
        ("rows model: fastermoe / flexmoe (target > 1)", "%.2f" % (rw("fastermoe") / rw("flexmoe"))),
        ratio("rows model per repeat (flexmoe's plans may differ): fastermoe / flexmoe",
              lambda r: rrep("fastermoe", r) / rrep("flexmoe", r), "%.3f"),
        ("rows model: static / flexmoe", "%.2f" % (rw("static") / rw("flexmoe"))),
        ratio("CPU-time model: flexmoe / its balanced ideal (target <= 1.15)", lambda r: mstep("flexmoe", r) / model["flexmoe"][r][1]),
        ratio("CPU-time model: deepspeed (drop_tokens=false) / flexmoe (target >= 1.5)",
              lambda r: mstep("deepspeed_pad", r) / mstep("flexmoe", r)),
        ratio("CPU-time model: fastermoe / flexmoe (target > 1)", lambda r: mstep("fastermoe", r) / mstep("flexmoe", r)),
        ratio("CPU-time model: static / flexmoe", lambda r: mstep("static", r) / mstep("flexmoe", r)),
        ratio("flexmoe step / its balanced ideal (target <= 1.15)", lambda r: step("flexmoe", r) / rep["flexmoe"][r]["ideal_step_s"]),
        ratio("flexmoe step / static run's balanced ideal", lambda r: step("flexmoe", r) / rep["static"][r]["ideal_step_s"]),
        ratio("deepspeed (drop_tokens=false) step / flexmoe step (target >= 1.5)",
              lambda r: step("deepspeed_pad", r) / step("flexmoe", r)),
        ratio("fastermoe step / flexmoe step (target > 1)", lambda r: step("fastermoe", r) / step("flexmoe", r)),
        ratio("static step / flexmoe step", lambda r: step("static", r) / step("flexmoe", r)),
        ("flexmoe dropped tokens (target 0)", "%d" % f["dropped"]),
        ("flexmoe val loss - static (dropless) val loss", "%.1e" % (f["final_val_loss"] - st["final_val_loss"])),
        ("flexmoe placement changes", "%d" % f.get("placement_changes", 0)),
    ]
    text += ("\nModelled MoE time per step: per layer, max over ranks of expert compute + bytes sent (all-to-all, replica/shadow sync, expert state moves) / %.2f GB/s"
             " (measured all-to-all bandwidth), summed over layers; compute = the rank's expert thread CPU time"
             " (CPU-time model) or its rows x %.2f us, the median measured CPU time per row (rows model)."
             " CPU-time ratios per repeat, median (range) over the %d repeats; wall-time ratios likewise:\n\n"
             % (bandwidth / 1e9, row_cost * 1e6, repeats))
    text += "\n".join(f"- {k}: {v}" for k, v in checks) + "\n"
    # Per-layer terms of the modelled step for the shadowing and placement policies, in the
    # repeat with the median rows model, over the first quarter of the iterations (after the
    # first) and the rest: busiest-rank rows against the mean, what the busiest rank sends, and
    # flexmoe's monitor error (|estimate - counts| / tokens, summed over experts).
    text += ("\nPer layer, means per iteration (busiest-rank rows / mean rows; KB sent by the busiest sender in the"
             " all-to-all, replica or shadow sync and expert moves; flexmoe's prediction error):\n\n"
             "| policy | iterations | layer | busiest rows | mean rows | a2a KB | sync KB | move KB | prediction error |\n"
             "|---|---|---|---|---|---|---|---|---|\n")
    for n in ("fastermoe", "flexmoe"):
        r = min(range(repeats), key=lambda q: abs(model[n][q][2] - rmed(n)[2]))
        recs = records[(n, r)]
        cut = max(1, (len(recs) + 1) // 4)
        for label, part in ((f"1-{cut}", recs[:cut]), (f"{cut + 1}-{len(recs)}", recs[cut:])):
            for l in range(len(part[0]["per_rank"]["rows"][0])):
                avg = lambda fn: sum(fn(x) for x in part) / len(part)
                pr = lambda x, k: [q[l] for q in x["per_rank"][k]]
                err = avg(lambda x: x["prediction_error"][l]) if "prediction_error" in part[0] else float("nan")
                cells = ["%s" % n, label, "%d" % l, "%.0f" % avg(lambda x: max(pr(x, "rows"))),
                         "%.0f" % avg(lambda x: sum(pr(x, "rows")) / len(pr(x, "rows"))),
                         "%.0f" % (avg(lambda x: max(pr(x, "alltoall_bytes"))) / 1e3),
                         "%.0f" % (avg(lambda x: max(pr(x, "sync_bytes"))) / 1e3),
                         "%.0f" % (avg(lambda x: max(pr(x, "move_bytes"))) / 1e3), "-" if err != err else "%.2f" % err]
                layer_rows.append(cells)
                text += "| " + " | ".join(cells) + " |\n"
    checks = [("modelled time: all-to-all bandwidth (GB/s)", "%.2f" % (bandwidth / 1e9)),
              ("modelled time: expert CPU time per row (us)", "%.2f" % (row_cost * 1e6))] + checks
print(text)
with open(f"{out}/checks.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["check", "value"])
    w.writerows(checks)
with open(f"{out}/per_layer.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["policy", "iterations", "layer", "busiest_rows", "mean_rows", "a2a_KB", "sync_KB", "move_KB",
                "prediction_error"])
    w.writerows(layer_rows)
print(f"Command: SKEW_BENCH_REPEATS={repeats} scripts/bench_moe.sh {config}; written to {out}/")
PY
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 scripts/plot_results.py moe-bench "$out"
fi
run_dir_finish
