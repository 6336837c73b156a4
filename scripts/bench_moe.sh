#!/usr/bin/env bash
# moe_train policies side by side at 2 ranks on identical traffic: a static run records the
# routing trace (aux loss off, so routing is skewed), then every policy trains the same model
# from the same seed on the same data while replaying that trace (moe.replay_trace). Reports
# tokens/s, step time, the modelled balanced-ideal step time (the same step with expert work
# spread evenly: step - max_rank expert time + total expert time / N), rank balance max/mean,
# dropped and padded tokens, and validation loss after the fixed token budget.
# Writes results/moe/bench_moe.csv and results/moe/bench_README.md.
# Usage: scripts/bench_moe.sh [extra moe_train flags]; SKEW_BUILD_DIR picks the build.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SKEW_BUILD_DIR:-build}
app="$build_dir/apps/moe_train"
if [[ ! -x "$app" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build_dir" -j "${SKEW_JOBS:-2}" --target moe_train
fi
out=results/moe
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config configs/moe_bench.ini "$@")
run() {  # name, flags...
  local name=$1
  shift
  mpirun --oversubscribe -np 2 "$app" "${common[@]}" --output.metrics="$work/$name.jsonl" "$@" | tail -n 1 >"$work/$name.json"
  echo "$name: $(cat "$work/$name.json")"
}
run record --moe.save_trace="$work/trace"
policies=("static" "deepspeed --moe.capacity_factor=1.0" "deepspeed_pad --moe.policy=deepspeed --moe.drop_tokens=false"
          "fastermoe")
"$app" --help | grep flexmoe >/dev/null && policies+=("flexmoe")
names=()
for p in "${policies[@]}"; do
  read -r name flags <<<"$p"
  [[ -z "${flags:-}" || "$flags" == --moe.capacity_factor* ]] && flags="--moe.policy=${name} ${flags:-}"
  run "$name" --moe.replay_trace="$work/trace" $flags
  names+=("$name")
done
/usr/bin/python3 - "$work" "$out" "${names[@]}" <<'PY'
import csv, json, sys
work, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for n in names:
    s = json.loads(open(f"{work}/{n}.json").read())
    rows.append([n, s["tokens_per_s"], s["step_s"] * 1e3, s["ideal_step_s"] * 1e3, s["step_s"] / s["ideal_step_s"],
                 s["balance"], s["dropped"], s["padded"], s["final_val_loss"]])
base = rows[0][2]
head = ["policy", "tokens_per_s", "step_ms", "ideal_step_ms", "step_over_ideal", "balance_max_over_mean",
        "dropped_tokens", "padded_rows", "val_loss", "speedup_vs_static"]
with open(f"{out}/bench_moe.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(head)
    for r in rows:
        w.writerow(r + [base / r[2]])
lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
for r in rows:
    lines.append("| %s | %.0f | %.1f | %.1f | %.2f | %.3f | %d | %d | %.4f | %.2fx |" % tuple(r + [base / r[2]]))
table = "\n".join(lines)
print(table)
cfg = open("configs/moe_bench.ini").read()
open(f"{out}/bench_README.md", "w").write(
    "# moe_train policies at 2 ranks (scripts/bench_moe.sh)\n\n"
    "Same model, data and seed; every policy replays the routing trace recorded by a static run\n"
    "(aux loss off, so routing is skewed), so all see identical traffic. Step times are means over\n"
    "the run after the first step; ideal = the same step with the expert work spread evenly\n"
    "(step - max-rank expert time + total expert time / N). Balance = max/mean rows computed per\n"
    "rank, averaged over layers and iterations. Val loss after the fixed token budget.\n"
    "Measured on a shared 2-core machine (other jobs running): ratios are indicative only.\n\n"
    + table + "\n\nConfig (configs/moe_bench.ini):\n\n```ini\n" + cfg + "```\n")
PY
