#!/usr/bin/env bash
# P = auto (lib/preduce/auto_group.hpp) against every fixed P in {2, 4, 8, 16} on the development
# skews (results/preduce/hetero/dev.txt: its model lines, seeds from SEEDS, default 1), at 16 and
# 64 simulated workers (WORKERS), with the preset's overlapped averaging and with blocking
# P-Reduce (--preduce.overlap=false --preduce.refresh_staleness=0). Same flags as
# scripts/bench_preduce_hetero.sh (MNIST, 90% target, 4 s of virtual time, trailing-window score),
# and --preduce.auto_max_group=16 so that the rule may pick any of them. Claim folder:
# results/preduce/autop (RECORD=1).
# Writes runs/*.json, autop.csv (one row per run: time to target, P used) and autop.md (per
# workers, variant and skew: each P's time, auto's pick and time, its warm-up, the best fixed P,
# auto / best). P = auto's time includes its warm-up window: 5 steps of the slowest worker
# (--preduce.auto_warmup_steps=5, the window bench_preduce_hetero.sh chose on its development set:
# results/preduce/hetero/tuned.txt; on these skews it picks the same P as 20 steps, in a quarter
# of the time).
#   scripts/bench_preduce_autop.sh [BUILD_DIR]     3 minutes here when quiet, ~13 at load 12-19
#   PS="auto" OUT=DIR ...                          only those P (the others' runs in DIR/runs are kept)
#   SMOKE=1 ...                                    16 workers, the first skew, 0.5 s: not a measurement
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
run_dir_start bench_preduce_autop "SEEDS WORKERS PS" "$@"
build="${1:-build}"
app="$build/apps/preduce_train"
run_dir_require_apps "$build" preduce_train
out=$RUN_DIR
run_dir_claim results/preduce/autop "$out"
[[ -z ${PS:-} ]] && rm -rf "$out/runs"  # the claim's copied runs are kept only to add P values to
mkdir -p "$out/runs"
scripts/fetch/mnist.sh data/mnist >/dev/null
export OPENBLAS_NUM_THREADS=1
common=(--output.dir= --config configs/preduce_mnist.ini --simulate --model.hidden=32 --train.max_seconds=4
        --train.eval_interval_s=0.1 --train.target_accuracy=0.9 --train.log_interval=0)
models=$(awk '$1 == "model"' results/preduce/hetero/dev.txt)
workers="${WORKERS:-16 64}"
if [[ ${SMOKE:-0} == 1 ]]; then
  common+=(--train.max_seconds=0.5)
  models=$(head -1 <<<"$models")
  workers=16
fi
jobs=()
for n in $workers; do
  for variant in overlap blocking; do
    vflags=""
    [[ $variant == blocking ]] && vflags="--preduce.overlap=false --preduce.refresh_staleness=0"
    while read -r _ model args; do
      for seed in ${SEEDS:-1}; do
        for p in ${PS:-2 4 8 16 auto}; do
          [[ $p != auto ]] && ((p > n)) && continue
          g=${p/auto/0} aflags=""
          [[ $p == auto ]] && aflags="--preduce.auto_warmup_steps=5"
          jobs+=("${n}_${variant}_${model}_p${p}_s$seed|--sim.workers=$n $args $vflags --preduce.group_size=$g $aflags --preduce.auto_max_group=16 --train.seed=$seed")
        done
      done
    done <<<"$models"
  done
done
run_one() {
  local tag=${1%%|*} flags=${1#*|}
  # shellcheck disable=SC2086
  "$app" "${common[@]}" $flags | tail -1 >"$out/runs/$tag.json"
}
export -f run_one
export app out
export COMMON="${common[*]}"
printf '%s\n' "${jobs[@]}" | xargs -P 2 -I{} bash -c 'common=($COMMON); run_one "$1"' _ {}
/usr/bin/python3 - "$out" <<'PY'
import csv, glob, json, os, re, sys, collections
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(f"{out}/runs/*.json")):
    tag = os.path.basename(path)[:-5]
    n, variant, rest = tag.split("_", 2)
    m = re.fullmatch(r"(.+)_p(\w+)_s(\d+)", rest)
    s = json.load(open(path))
    tta = s["time_to_target_s"]
    if tta >= 0 and m.group(2) == "auto":
        tta += s.get("auto_warmup_s", 0.0)
    rows.append(dict(workers=int(n), variant=variant, skew=m.group(1), p=m.group(2), seed=int(m.group(3)),
                     p_used=s.get("group_size", m.group(2)), tta_s=tta if tta >= 0 else s["wall_s"],
                     reached=tta >= 0, warmup_s=s.get("auto_warmup_s", 0.0)))
with open(f"{out}/autop.csv", "w", newline="") as f:
    w = csv.DictWriter(f, list(rows[0]))
    w.writeheader()
    w.writerows(rows)
cell = collections.defaultdict(list)
used, warm = {}, collections.defaultdict(list)
for r in rows:
    cell[(r["workers"], r["variant"], r["skew"], r["p"])].append(r["tta_s"])
    if r["p"] == "auto":
        used[(r["workers"], r["variant"], r["skew"])] = r["p_used"]
        warm[(r["workers"], r["variant"], r["skew"])].append(r["warmup_s"])
mean = lambda v: sum(v) / len(v)
lines = ["| workers | variant | skew | P=2 | P=4 | P=8 | P=16 | auto (P) | its warm-up | best fixed | auto / best |",
         "|" + "---|" * 11]
for key in sorted({k[:3] for k in cell}):
    fixed = {p: mean(cell[key + (p,)]) for p in ("2", "4", "8", "16") if key + (p,) in cell}
    auto = mean(cell[key + ("auto",)])
    best = min(fixed, key=fixed.get)
    lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(f"{fixed[p]:.2f}" if p in fixed else "" for p in ("2", "4", "8", "16"))
                 + f" | {auto:.2f} ({used[key]}) | {mean(warm[key]):.2f} | P={best} {fixed[best]:.2f} | {auto / fixed[best]:.2f} |")
open(f"{out}/autop.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
run_dir_finish
