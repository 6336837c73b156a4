#!/usr/bin/env bash
# Calibrates placement_sim's cost constants from measured moe_train runs and scores the 64-GPU
# simulation with them (issue 15: a simulator that scores plans with the planner's own model
# cannot lose). The fit/held-out split is fixed in results/moe/sim_calibration/heldout.txt:
#   1. moe_train on configs/moe_bench_skew.ini, 40 iterations, for every run listed there
#      (policy, ranks, seed), metrics JSONL into the claim folder's runs/;
#   2. placement_sim --sim.calibrate (the fit runs) --sim.calibrate_check (the held-out runs):
#      fitted constants (constants.json) and the held-out error per term (calibration.json);
#   3. placement_sim on configs/sim_64gpu.ini twice: scored with the planners' own model and with
#      the calibrated constants (sim.scoring), tables side by side.
# Writes results/moe/sim_calibration/: constants.json calibration.json table_planner.md
# table_calibrated.md summary_*.csv manifest.txt runs/. Runs with more ranks than cores share
# them: their all-to-all wall time includes waiting for a descheduled peer (see the README).
# These files go to a run directory (scripts/run_dir.sh: out/calibrate_sim/<UTC time>/ or OUT);
# RECORD=1 replaces the claim folder with it. SMOKE=1: 6-iteration runs, a 20-iteration simulation
# without the scaling rows, not a measurement (RECORD=1 refused; the fit refuses runs this short
# when waiting dominates their all-to-all, as on a loaded machine).
# Usage: scripts/calibrate_sim.sh; SKEW_BUILD_DIR picks the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
run_dir_start calibrate_sim "SKEW_BUILD_DIR" "$@"
build_dir=${SKEW_BUILD_DIR:-build}
run_dir_require_apps "$build_dir" moe_train placement_sim
out=$RUN_DIR
run_dir_claim results/moe/sim_calibration "$out"
runs=$out/runs
iterations=40 sim_flags=()
if [[ ${SMOKE:-0} == 1 ]]; then
  iterations=6 sim_flags=(--sim.iterations=20 --sim.scaling=)
fi
mkdir -p "$runs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_mpi_yield_when_idle=1
fit=() check=()
while read -r role policy ranks seed_spec; do
  [[ -z "$role" || "$role" == \#* ]] && continue
  seed=${seed_spec#seed=}
  seed=${seed:-1}
  file="$runs/${policy}_np${ranks}_seed${seed}.jsonl"
  echo "calibrate_sim: moe_train $policy at $ranks ranks, seed $seed ($role)"
  # stdin from /dev/null: mpirun would otherwise read the rest of the list.
  mpirun -np "$ranks" "$build_dir/apps/moe_train" --output.dir= --config configs/moe_bench_skew.ini --train.iterations="$iterations" \
    --train.seed="$seed" --moe.policy="$policy" --output.metrics="$file" >/dev/null </dev/null
  if [[ "$role" == fit ]]; then fit+=("$file"); else check+=("$file"); fi
done <"$out/heldout.txt"
join() { local IFS=,; echo "$*"; }
# The expert of configs/moe_bench_skew.ini: d_model 64, d_ff 512.
"$build_dir/apps/placement_sim" --sim.hidden=64 --sim.ffn_hidden=512 --sim.calibrate="$(join "${fit[@]}")" \
  --sim.calibrate_check="$(join "${check[@]}")" --output.calibration="$out/constants.json" | tee "$out/calibration.log"
tail -n 1 "$out/calibration.log" >"$out/calibration.json"
for scoring in planner calibrated; do
  flag=()
  [[ $scoring == calibrated ]] && flag=(--sim.scoring="$out/constants.json")
  "$build_dir/apps/placement_sim" --config configs/sim_64gpu.ini ${sim_flags[@]+"${sim_flags[@]}"} ${flag[@]+"${flag[@]}"} --output.table="$out/table_$scoring.md" \
    --output.summary_csv="$out/summary_$scoring.csv" >/dev/null
  echo "== 64 GPUs, scored with the $scoring model"
  cat "$out/table_$scoring.md"
done
{
  echo "command: $run_dir_command"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "config: configs/moe_bench_skew.ini ($iterations iterations), configs/sim_64gpu.ini; split: heldout.txt"
} >"$out/manifest.txt"
run_dir_finish
