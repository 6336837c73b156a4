#!/usr/bin/env bash
# The wide_train schema sweep: each schema at its own best thread count and batch size.
#   schemas  classical/hogwild (the default classical), classical/atomic (kept for the record),
#            flow
#   models   LR, FM, FFM (k=8), AdaGrad lr 0.05, the same EPOCHS for every run (no early stop)
#   grid     threads 1..THREADS_MAX, batch sizes BATCHES
#   data     the held-out synthetic set fixed in results/wide/heldout.txt (train rows [0, ROWS),
#            test rows TEST_ROWS from its test_first_row)
# Each run is one wide_train process; from its metrics it takes rows/s of the training steps,
# the test AUC after the last epoch, and the training seconds (train_s, validation and loading
# excluded) of the first epoch whose test AUC reaches the model's target. Target per model: the
# lower of the two schemas' best final test AUCs, less 0.001, so that both reach it.
# Writes into results/wide/sweep_heldout/: runs/<config>/ (metrics.jsonl, summary.json), runs/<config>.log,
# sweep.csv (one row per run), best.csv (per model and schema: best rows/s, best time to target;
# flow over classical ratios), manifest.json (command, commit, config, machine, load, date) and
# sweep.png (when /usr/bin/python3 has matplotlib).
# These go to a run directory (scripts/run_dir.sh: out/bench_wide_sweep/<UTC time>/, or OUT);
# RECORD=1 replaces the claim folder with it.
# Usage: scripts/bench_wide_sweep.sh [BUILD_DIR]   (default build)
#   ROWS=200000 TEST_ROWS=50000 EPOCHS=3 THREADS_MAX=$(nproc) BATCHES="1 16 256 4096"
#   MODELS="lr fm ffm" OUT=DIR
#   SMOKE=1: LR only, 2000 rows, 1 epoch, 1 thread, batch 256; not a measurement (RECORD=1 refused)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
source scripts/progress.sh
run_dir_start bench_wide_sweep "ROWS TEST_ROWS EPOCHS THREADS_MAX BATCHES MODELS" "$@"
if [[ ${SMOKE:-0} == 1 ]]; then
  ROWS=2000 EPOCHS=1 THREADS_MAX=1 BATCHES=256 MODELS=lr
fi
build=${1:-build}
rows=${ROWS:-200000}
test_rows=${TEST_ROWS:-$((rows / 4))}
epochs=${EPOCHS:-3}
threads_max=${THREADS_MAX:-$(nproc)}
batches=${BATCHES:-1 16 256 4096}
models=${MODELS:-lr fm ffm}
out=$RUN_DIR
run_dir_claim results/wide/sweep_heldout "$out"
heldout=results/wide/heldout.txt
value() { sed -n "s/^$1=//p" "$heldout"; }
alpha=$(value alpha) seed=$(value seed) features=$(value features) test_first=$(value test_first_row)
(( rows <= test_first )) || { echo "bench_wide_sweep: ROWS=$rows reaches the test rows at $test_first" >&2; exit 1; }
spec="synthetic:criteo?features=$features&alpha=$alpha&seed=$seed"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$out/runs"
mkdir -p "$out/runs"
load_before=$(uptime)
start_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
progress_begin $(($(wc -w <<<"$models") * 3 * threads_max * $(wc -w <<<"$batches")))
for model in $models; do
  for variant in classical/hogwild classical/atomic flow; do
    schema=${variant%/*}
    sync=${variant#*/}
    [[ $variant == flow ]] && sync=hogwild  # ignored by flow
    for threads in $(seq 1 "$threads_max"); do
      for batch in $batches; do
        name="${model}_${variant/\//-}_t${threads}_b${batch}"
        progress_next "wide_train $name"
        "$build/apps/wide_train" --data.train="$spec&rows=$rows" \
          --data.valid="$spec&rows=$test_rows&first_row=$test_first" --model.type="$model" --model.k=8 \
          --train.schema="$schema" --train.classical_sync="$sync" --train.optimizer=adagrad --train.lr=0.05 \
          --train.epochs="$epochs" --train.patience=0 --train.batch_size="$batch" --train.threads="$threads" \
          --train.log_every=1000000000 --output.dir="$out/runs/$name" >"$out/runs/$name.log" 2>&1 ||
          { echo "bench_wide_sweep: $name failed, see $out/runs/$name.log" >&2; exit 1; }
        rm -f "$out/runs/$name/model.safetensors"  # the saved best model: megabytes per run, not a result
        echo "$name done"
      done
    done
  done
done
load_after=$(uptime)
py=/usr/bin/python3  # the system python, where python3-matplotlib installs
[[ -x $py ]] || py=python3
"$py" - "$out" "$rows" "$test_rows" "$epochs" "$spec" <<'PY'
import csv, glob, json, os, sys
out, rows, test_rows, epochs, spec = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
runs = []
for d in sorted(glob.glob(os.path.join(out, "runs", "*/"))):
    name = os.path.basename(d.rstrip("/"))
    model, variant, t, b = name.split("_")
    epochs_ = [r for r in map(json.loads, open(os.path.join(d, "metrics.jsonl"))) if "valid_auc" in r]
    summary = json.load(open(os.path.join(d, "summary.json")))
    runs.append(dict(model=model, schema=variant.split("-")[0], sync=variant.split("-")[1] if "-" in variant else "",
                     threads=int(t[1:]), batch=int(b[1:]), rows_per_s=summary["train_samples_per_s"],
                     train_s=epochs_[-1]["train_s"], final_auc=epochs_[-1]["valid_auc"],
                     final_logloss=epochs_[-1]["valid_logloss"], curve=[(r["train_s"], r["valid_auc"]) for r in epochs_]))
def label(r): return r["schema"] + ("/" + r["sync"] if r["sync"] else "")
best_rows = []
for model in sorted({r["model"] for r in runs}):
    mine = [r for r in runs if r["model"] == model]
    by = {s: [r for r in mine if r["schema"] == s] for s in ("classical", "flow")}
    target = min(max(r["final_auc"] for r in by[s]) for s in by) - 0.001
    for r in mine:
        hits = [s for s, auc in r["curve"] if auc >= target]
        r["target_auc"], r["seconds_to_target"] = target, (hits[0] if hits else None)
    for s, rs in by.items():
        fastest = max(rs, key=lambda r: r["rows_per_s"])
        reached = [r for r in rs if r["seconds_to_target"] is not None]
        quickest = min(reached, key=lambda r: r["seconds_to_target"]) if reached else None
        best_rows.append(dict(model=model, schema=s, target_auc=round(target, 5),
            best_rows_per_s=round(fastest["rows_per_s"]), at=f"{label(fastest)} t{fastest['threads']} b{fastest['batch']}",
            its_final_auc=round(fastest["final_auc"], 5),
            best_final_auc=round(max(r["final_auc"] for r in rs), 5),
            best_seconds_to_target=round(quickest["seconds_to_target"], 4) if quickest else "never",
            to_target_at=f"{label(quickest)} t{quickest['threads']} b{quickest['batch']}" if quickest else ""))
    c, f = best_rows[-2], best_rows[-1]
    for r in (c, f):
        r["flow_over_classical_rows_per_s"] = round(f["best_rows_per_s"] / c["best_rows_per_s"], 3)
        r["classical_over_flow_seconds_to_target"] = (round(c["best_seconds_to_target"] / f["best_seconds_to_target"], 3)
            if "never" not in (c["best_seconds_to_target"], f["best_seconds_to_target"]) else "n/a")
fields = ["model", "schema", "sync", "threads", "batch", "rows_per_s", "train_s", "final_auc", "final_logloss",
          "target_auc", "seconds_to_target"]
with open(os.path.join(out, "sweep.csv"), "w", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    for r in runs: w.writerow({k: ("never" if v is None else v) for k, v in r.items()})
with open(os.path.join(out, "best.csv"), "w", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=list(best_rows[0].keys()))
    w.writeheader()
    w.writerows(best_rows)
for r in best_rows: print(r)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("bench_wide_sweep: no matplotlib for this python; sweep.png not drawn (install python3-matplotlib)")
    sys.exit(0)
models = sorted({r["model"] for r in runs})
fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
for ax, model in zip(axes[0], models):
    for (schema, sync), marker in {("classical", "hogwild"): "o", ("classical", "atomic"): "x", ("flow", ""): "s"}.items():
        rs = [r for r in runs if r["model"] == model and r["schema"] == schema and r["sync"] == sync]
        ax.scatter([r["rows_per_s"] for r in rs], [r["final_auc"] for r in rs], marker=marker,
                   label=schema + ("/" + sync if sync else ""))
    ax.set_xscale("log")
    ax.set_xlabel("training rows/s (every thread count and batch)")
    ax.set_ylabel(f"test AUC after {epochs} epochs")
    ax.set_title(f"{model}: held-out synthetic, {rows} rows")
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(out, "sweep.png"), dpi=110)
PY
python3 - "$out/manifest.json" "$0 ${*:-}" "$(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!results' || echo '+dirty')" \
  "$spec" "$rows" "$test_rows" "$epochs" "$threads_max" "$batches" "$models" "$start_date" "$load_before" "$load_after" <<'PY'
import json, os, platform, subprocess, sys
a = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump({"command": f"ROWS={a[4]} TEST_ROWS={a[5]} EPOCHS={a[6]} THREADS_MAX={a[7]} BATCHES='{a[8]}' MODELS='{a[9]}' {a[1]}",
           "commit": a[2], "data": a[3] + f"&rows={a[4]}", "test_data": f"{a[3]}&rows={a[5]} from the held-out test_first_row",
           "config": {"optimizer": "adagrad", "lr": 0.05, "k": 8, "epochs": int(a[6]), "patience": 0,
                      "flow": "wide_train defaults (tile_samples 256, hot_features 4096, replica_budget_mb 16)"},
           "machine": {"cpu": cpu, "cores": os.cpu_count(), "host": platform.node(), "kernel": platform.release()},
           "load_before": a[11].strip(), "load_after": a[12].strip(), "started": a[10]},
          open(a[0], "w"), indent=1)
PY
echo "bench_wide_sweep: $out/{sweep.csv,best.csv,manifest.json}"
run_dir_finish
