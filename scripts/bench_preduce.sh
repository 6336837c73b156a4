#!/usr/bin/env bash
# Partial reduce against all-reduce, AD-PSGD and eager-SGD under a straggler (MLP on MNIST,
# configs/preduce_mnist.ini: 4 workers, one 4x slower, exponential jitter on all).
#   1. real: mpirun -np 4 (on 2 cores the ranks share CPUs; the injected delays are real sleep)
#   2. the simulator at N = 4, given the per-step costs measured in step 1 for the same mode
#      (compute per step; one reduction plus the per-step overhead: sleep overshoot, loop), and
#      its time-to-accuracy error against step 1
#   3. the simulator at N = 32 and 256 (a smaller MLP, 784-32-10, to fit this machine)
# Writes results/preduce/{results.csv,curve_*.csv,summary_*.json,tta.png}.
#   scripts/bench_preduce.sh [BUILD_DIR]     (default build; about 12 minutes on 2 busy cores)
#   BENCH_REUSE_REAL=1 scripts/bench_preduce.sh ...   keeps existing real-run results
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
app="$build/apps/preduce_train"
[[ -x "$app" ]] || { echo "bench_preduce: $app not built"; exit 2; }
out=results/preduce
mkdir -p "$out"
rm -f "$out/calibration.txt"
scripts/fetch/mnist.sh data/mnist
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cfg=configs/preduce_mnist.ini
variants=(
  "allreduce|--sync.mode=allreduce"
  "preduce_p2|--sync.mode=preduce --preduce.group_size=2"
  "preduce_p3|--sync.mode=preduce --preduce.group_size=3"
  "adpsgd|--sync.mode=adpsgd"
  "eager|--sync.mode=eager"
)
# allreduce and adpsgd stop by steps (every round needs every worker); the others stop by time.
sync_steps=1300
run() {  # run KIND N NAME ARGS...
  local kind=$1 n=$2 name=$3
  shift 3
  [[ $name == allreduce || $name == adpsgd ]] && set -- "$@" --train.steps="$sync_steps"
  local tag="${kind}_${n}_${name}"
  echo "bench_preduce: $tag" >&2
  if [[ $kind == real ]]; then
    [[ ${BENCH_REUSE_REAL:-0} == 1 && -s "$out/summary_$tag.json" ]] && return
    mpirun --oversubscribe -np "$n" "$app" --config "$cfg" "$@" --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
  else
    "$app" --config "$cfg" --simulate --sim.workers="$n" "$@" --output.curve="$out/curve_$tag.csv" | tail -1 >"$out/summary_$tag.json"
  fi
}
for v in "${variants[@]}"; do
  # shellcheck disable=SC2086
  run real 4 "${v%%|*}" ${v#*|}
done
# Costs measured on the real ranks of each mode drive its N = 4 simulation: compute per step,
# mean over workers; one reduction = min over workers of comm / steps (the rank that waits
# least) plus the mean unaccounted time per step (end - compute - injected - wait - comm: sleep
# overshoot and loop overhead on shared cores), which the simulator charges per reduction.
calibrate() {
  python3 - "$out/summary_real_4_$1.json" <<'PY'
import json, sys
ws = json.load(open(sys.argv[1]))["per_worker"]
steps = [w["steps_per_s"] * w["end_s"] for w in ws]
compute = sum(w["compute_s"] / n for w, n in zip(ws, steps)) / len(ws)
other = sum((w["end_s"] - w["compute_s"] - w["injected_s"] - w["wait_s"] - w["comm_s"]) / n for w, n in zip(ws, steps)) / len(ws)
comm = min(w["comm_s"] / n for w, n in zip(ws, steps)) + other
print(f"--sim.compute_ms={1e3 * compute:.4f} --sim.latency_ms={1e3 * comm:.4f}")
PY
}
for v in "${variants[@]}"; do
  cal=$(calibrate "${v%%|*}")
  echo "bench_preduce: ${v%%|*} measured $cal" >&2
  echo "${v%%|*} $cal" >>"$out/calibration.txt"
  # shellcheck disable=SC2086
  run sim 4 "${v%%|*}" ${v#*|} $cal
done
sync_steps=250
scale=(--model.hidden=32 --train.max_seconds=6 --train.eval_interval_s=0.1 --train.target_accuracy=0.9)
for n in 32 256; do
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    run sim "$n" "${v%%|*}" ${v#*|} "${scale[@]}"
  done
done
"${PYTHON:-/usr/bin/python3}" - "$out" <<'PY'
import csv, glob, json, os, sys
out = sys.argv[1]
def curve(tag):
    rows = list(csv.reader(open(f"{out}/curve_{tag}.csv")))[1:]
    return [(float(t), float(a)) for t, a in rows]
def tta(points, target):
    hit = [t for t, a in points if a >= target]
    return hit[0] if hit else None
modes = ["allreduce", "preduce_p2", "preduce_p3", "adpsgd", "eager"]
rows = []
for kind, n, targets in (("real", 4, (0.94, 0.95)), ("sim", 4, (0.94, 0.95)), ("sim", 32, (0.9,)), ("sim", 256, (0.9,))):
    for target in targets:
        base = None
        for mode in modes:
            tag = f"{kind}_{n}_{mode}"
            if not os.path.exists(f"{out}/summary_{tag}.json"):
                continue
            s = json.load(open(f"{out}/summary_{tag}.json"))
            t = tta(curve(tag), target)
            if mode == "allreduce":
                base = t
            idle = s.get("mean_idle_fraction")
            if idle is None:
                idle = sum(w["idle_fraction"] for w in s["per_worker"]) / len(s["per_worker"])
            rows.append(dict(kind=kind, workers=n, mode=mode, target=target,
                             time_to_target_s="" if t is None else round(t, 3),
                             speedup_vs_allreduce="" if t is None or base is None else round(base / t, 3),
                             final_accuracy_mean=round(s["final_accuracy_mean"], 4),
                             average_model_accuracy=round(s["average_model_accuracy"], 4),
                             wall_s=round(s["wall_s"], 2), mean_idle_fraction=round(idle, 3)))
# Simulator error at N = 4 against the real run (same target).
real = {(r["mode"], r["target"]): r["time_to_target_s"] for r in rows if r["kind"] == "real"}
for r in rows:
    ref = real.get((r["mode"], r["target"]))
    ok = r["kind"] == "sim" and r["workers"] == 4 and ref not in (None, "") and r["time_to_target_s"] != ""
    r["sim_error_vs_real"] = round(abs(r["time_to_target_s"] - ref) / ref, 3) if ok else ""
cols = list(rows[0].keys())
with open(f"{out}/results.csv", "w") as f:
    w = csv.DictWriter(f, cols)
    w.writeheader()
    w.writerows(rows)
print("# N=4 simulation costs measured per mode on the real ranks:")
for line in open(f"{out}/calibration.txt"):
    print("#   " + line.strip())
print(" ".join(f"{c:>22}" for c in cols))
for r in rows:
    print(" ".join(f"{str(r[c]):>22}" for c in cols))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, kind in zip(axes, ("real", "sim")):
        for mode in modes:
            tag = f"{kind}_4_{mode}"
            if os.path.exists(f"{out}/curve_{tag}.csv"):
                pts = curve(tag)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=mode)
        ax.set_ylim(0.85, 0.97)
        ax.axhline(0.94, color="gray", lw=0.5)
        ax.set_title(f"MNIST MLP, 4 workers (one 4x slower), {kind}")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("mean worker test accuracy")
        ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/tta.png", dpi=90)
except ImportError:
    print("# matplotlib not available: no plot")
PY
