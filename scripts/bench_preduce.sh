#!/usr/bin/env bash
# Partial reduce against all-reduce, AD-PSGD and eager-SGD under a straggler (MLP 784-256-128-10
# on MNIST, configs/preduce_mnist.ini: 4 workers, one 4x slower, exponential jitter on all).
#   1. real: mpirun -np 4, REPEATS times, modes interleaved (on 2 cores the ranks share CPUs; the
#      injected delays are real sleep); time to accuracy is the median over the repeats
#   2. the simulator at N = 4, given the per-step costs measured in step 1 for the same mode,
#      and its time-to-accuracy error against the real median
#   3. the simulator at N = 32 and 256 (a smaller MLP, 784-32-10, to fit this machine), for
#      train.seed = 1..SCALE_SEEDS; time to accuracy is the median over the seeds
# Writes results/preduce/{results.csv,calibration.txt,curve_*.csv,summary_*.json,tta.png}.
#   scripts/bench_preduce.sh [BUILD_DIR]     (default build; about 15 minutes on 2 busy cores)
#   REPEATS=1 scripts/bench_preduce.sh ...   one real run per mode
#   BENCH_REUSE_REAL=1 scripts/bench_preduce.sh ...   keeps existing real-run results
#   BENCH_REUSE_SCALE=1 scripts/bench_preduce.sh ...  keeps existing N = 32 and 256 results
#   SCALE_SEEDS=6 scripts/bench_preduce.sh ...        seeds per mode at N = 32 and 256 (default 1;
#                                                     6 take about 25 minutes more)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
app="$build/apps/preduce_train"
[[ -x "$app" ]] || { echo "bench_preduce: $app not built"; exit 2; }
out=results/preduce
repeats="${REPEATS:-3}"
scale_seeds="${SCALE_SEEDS:-1}"
mkdir -p "$out"
scripts/fetch/mnist.sh data/mnist
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cfg=configs/preduce_mnist.ini
variants=(
  "allreduce|--sync.mode=allreduce"
  "preduce_p2|--sync.mode=preduce --preduce.group_size=2 --preduce.overlap=true"
  "preduce_p3|--sync.mode=preduce --preduce.group_size=3 --preduce.overlap=true"
  "preduce_p2_blocking|--sync.mode=preduce --preduce.group_size=2 --preduce.overlap=false --preduce.refresh_staleness=0"
  "preduce_p3_blocking|--sync.mode=preduce --preduce.group_size=3 --preduce.overlap=false --preduce.refresh_staleness=0"
  "adpsgd|--sync.mode=adpsgd"
  "eager|--sync.mode=eager"
  "allreduce_homogeneous|--sync.mode=allreduce --hetero.slowdown=1,1,1,1"
)
# allreduce_homogeneous is the bound: all-reduce without the straggler (every worker fast), the
# time to accuracy of the same total batch with nothing to tolerate.
# allreduce stops by steps (every round needs every worker); the others stop by time.
sync_steps=1000
run() {  # run KIND N TAG_SUFFIX NAME ARGS...
  local kind=$1 n=$2 suffix=$3 name=$4
  shift 4
  [[ $name == allreduce* ]] && set -- "$@" --train.steps="$sync_steps"
  local tag="${kind}_${n}_${name}${suffix}"
  echo "bench_preduce: $tag" >&2
  if [[ $kind == real ]]; then
    [[ ${BENCH_REUSE_REAL:-0} == 1 && -s "$out/summary_$tag.json" ]] && return
    mpirun --oversubscribe -np "$n" "$app" --config "$cfg" "$@" --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
  else
    [[ ${BENCH_REUSE_SCALE:-0} == 1 && $n != 4 && -s "$out/summary_$tag.json" ]] && return
    "$app" --config "$cfg" --simulate --sim.workers="$n" "$@" --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
  fi
}
for r in $(seq 1 "$repeats"); do
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    run real 4 "_r$r" "${v%%|*}" ${v#*|}
  done
done
# Costs measured on the real ranks of each mode (mean over repeats) drive its N = 4 simulation:
#   compute: per step, mean over workers (the slowdown scales it, as in the real run);
#   overhead: the unaccounted time per step (end - compute - injected - wait - comm: sleep
#     overshoot and loop overhead on shared cores), which the slowdown does not scale;
#   latency: one reduction, the least-waiting worker's comm per step (adpsgd and overlapped
#     preduce: the communication thread's time per averaging, mean over workers);
#   controller: preduce/eager, the part of each wait that is controller and message latency, per
#     step (per averaging when overlapped).
calibrate() {
  python3 - "$out" "$1" "$repeats" <<'PY'
import json, sys
out, mode, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
compute = overhead = latency = controller = 0.0
for r in range(1, repeats + 1):
    ws = json.load(open(f"{out}/summary_real_4_{mode}_r{r}.json"))["per_worker"]
    background = "sync_wait_s" in ws[0]  # adpsgd, overlapped preduce: comm off the computing path
    steps = [w["steps_per_s"] * w["end_s"] for w in ws]
    per = [w["syncs"] for w in ws] if background else steps
    compute += sum(w["compute_s"] / n for w, n in zip(ws, steps)) / len(ws) / repeats
    overhead += sum((w["end_s"] - w["compute_s"] - w["injected_s"] - w["wait_s"] - (0 if background else w["comm_s"])) / n
                    for w, n in zip(ws, steps)) / len(ws) / repeats
    if background:
        latency += sum(w["comm_s"] / max(p, 1) for w, p in zip(ws, per)) / len(ws) / repeats
    else:
        latency += min(w["comm_s"] / n for w, n in zip(ws, steps)) / repeats
    controller += sum(w.get("controller_s", 0.0) / max(p, 1) for w, p in zip(ws, per)) / len(ws) / repeats
print(f"--sim.compute_ms={1e3 * compute:.4f} --sim.overhead_ms={1e3 * overhead:.4f} --sim.latency_ms={1e3 * latency:.4f} "
      f"--sim.controller_ms={1e3 * controller:.4f}")
PY
}
rm -f "$out/calibration.txt"
for v in "${variants[@]}"; do
  cal=$(calibrate "${v%%|*}")
  echo "bench_preduce: ${v%%|*} measured $cal" >&2
  echo "${v%%|*} $cal" >>"$out/calibration.txt"
  # shellcheck disable=SC2086
  run sim 4 "" "${v%%|*}" ${v#*|} $cal
done
sync_steps=250
scale=(--model.hidden=32 --train.max_seconds=6 --train.eval_interval_s=0.1 --train.target_accuracy=0.9)
for n in 32 256; do
  for seed in $(seq 1 "$scale_seeds"); do
    for v in "${variants[@]}"; do
      # shellcheck disable=SC2086
      run sim "$n" "_s$seed" "${v%%|*}" ${v#*|} "${scale[@]}" --train.seed="$seed"
    done
  done
done
"${PYTHON:-/usr/bin/python3}" - "$out" "$repeats" "$scale_seeds" <<'PY'
import csv, json, math, os, statistics, sys
out, repeats, scale_seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def curve(tag):
    rows = list(csv.reader(open(f"{out}/curve_{tag}.csv")))[1:]
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
    s = json.load(open(f"{out}/summary_{tag}.json"))
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
            if not all(os.path.exists(f"{out}/summary_{t}.json") for t in tags[mode]):
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
with open(f"{out}/results.csv", "w") as f:
    w = csv.DictWriter(f, cols)
    w.writeheader()
    w.writerows(rows)
print("# N=4 simulation costs measured per mode on the real ranks:")
for line in open(f"{out}/calibration.txt"):
    print("#   " + line.strip())
print(" ".join(f"{c:>20}" for c in cols))
for r in rows:
    print(" ".join(f"{str(r[c]):>20}" for c in cols))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = (("real", 4, "_r1", 0.95, "MNIST MLP, 4 ranks (one 4x slower), repeat 1"),
              ("sim", 4, "", 0.95, "MNIST MLP, 4 workers (one 4x slower), simulated"),
              ("sim", 256, "_s1", 0.90, "784-32-10 MLP, 256 workers (every 4th 4x slower), seed 1"))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    for ax, (kind, n, suffix, target, title) in zip(axes, panels):
        for mode in modes:
            tag = f"{kind}_{n}_{mode}{suffix}"
            if os.path.exists(f"{out}/curve_{tag}.csv"):
                pts = curve(tag)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=mode, lw=1)
        ax.set_ylim(target - 0.07, target + 0.02)
        ax.axhline(target, color="gray", lw=0.5)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("mean worker test accuracy")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out}/tta.png", dpi=90)
except ImportError:
    print("# matplotlib not available: no plot")
PY
