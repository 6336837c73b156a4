#!/usr/bin/env bash
# The measured 2-rank skewed table of issue 35 (item 4), with the simulator's prediction of the
# same runs. moe_train at 2 ranks on configs/moe_skewed_2rank.ini (8 experts, top-1, weak balance
# loss, 2048 tokens a rank a step): one static run records the routing (moe.save_trace, and its
# metrics' per-iteration counts), then every policy replays that routing, the repeats interleaved
# across policies so background load hits all alike:
#   flexmoe             replicas planned every placement.interval iterations
#   fastermoe           shadowing with the smart schedule on (moe.fastermoe_chunks 1: pairwise
#                       stages, the next peer's exchange overlapping the current compute)
#   deepspeed_dropless  every expert padded to the largest block (drop_tokens false)
#   deepspeed_cf1.0, deepspeed_cf1.25   capacity factor 1.0 / 1.25, tokens over capacity dropped:
#                       they do less work, so they are compared on wall time until their
#                       validation loss reaches the dropless run's final one (they run twice as
#                       many iterations to get there; "not reached" otherwise)
# Measured: each run's median step (wall clock, rank 0, the first iteration left out), and its MoE
# part (expert compute + all-to-all incl. waiting for the peer + replica sync, rank 0's timers);
# the table holds the median over repeats and the spread (max-min)/median.
# Modelled: placement_sim replays the recorded routing at 2 GPUs with the cost constants flexmoe
# measured at start-up in these runs (median over its repeats: expert compute rate, all-to-all
# bandwidth and latency, all-reduce bandwidth), under both exchange schedules; its step is the MoE
# part only (the median over iterations, the first left out, as measured), so the predicted step
# is that plus the non-MoE part measured on the recording run (static: the same model and batch
# for every policy, and no padded rows, whose dispatch and buffers outside the MoE timers the
# simulator does not model). Error = predicted / measured - 1.
# Writes to a run directory (scripts/run_dir.sh: out/bench_moe_skewed/<UTC time>/ or OUT):
# table.md, table.csv, runs/ (metrics JSONL and summaries); RECORD=1 replaces the claim folder
# results/moe/skewed_2rank/ with it (its README.md is kept). SMOKE=1: 4-iteration runs of a
# smaller batch, one repeat, not a measurement (RECORD=1 refused).
# Usage: scripts/bench_moe_skewed.sh [extra moe_train flags]; SKEW_BUILD_DIR picks the build,
# SKEW_BENCH_REPEATS the repeats (default 3), SKEW_BENCH_ITERATIONS the dropless runs' iterations
# (default the config's train.iterations; the recording and capacity runs take twice as many).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/run_dir.sh
run_dir_start bench_moe_skewed "SKEW_BENCH_REPEATS SKEW_BENCH_ITERATIONS SKEW_BUILD_DIR" "$@"
build_dir=${SKEW_BUILD_DIR:-build}
run_dir_require_apps "$build_dir" moe_train placement_sim
config=configs/moe_skewed_2rank.ini
out=$RUN_DIR
run_dir_claim results/moe/skewed_2rank "$out"
runs=$out/runs
rm -rf "$runs"  # the claim folder's copy: only this run's runs may be tabulated
mkdir -p "$runs"
repeats=${SKEW_BENCH_REPEATS:-3}
# config_value SECTION KEY: the workload's setting, which the simulator's replay must share.
config_value() {
  awk -F' *= *' -v section="[$1]" -v key="$2" '/^\[/{s=$0} s==section && $1==key{print $2}' "$config"
}
iterations=${SKEW_BENCH_ITERATIONS:-$(config_value train iterations)}
size=()
if [[ ${SMOKE:-0} == 1 ]]; then
  repeats=1 iterations=4
  size=(--train.batch_size=4 --train.eval_interval=2 --train.eval_sequences=8 --train.warmup=1)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_mpi_yield_when_idle=1
# One moe_train run at 2 ranks: NAME ITERATIONS FLAGS... -> runs/NAME.jsonl (metrics), runs/NAME.json.
train() {
  local name=$1 its=$2
  shift 2
  mpirun -np 2 "$build_dir/apps/moe_train" --output.dir= --config "$config" ${size[@]+"${size[@]}"} \
    --train.iterations="$its" --output.metrics="$runs/$name.jsonl" "$@" </dev/null | tail -n 1 >"$runs/$name.json"
}
echo "bench_moe_skewed: recording the routing (static, $((2 * iterations)) iterations)"
train record $((2 * iterations)) --moe.policy=static --moe.save_trace="$runs/trace" "$@"
declare -A flags=(
  [flexmoe]="--moe.policy=flexmoe"
  [fastermoe]="--moe.policy=fastermoe --moe.fastermoe_chunks=1"
  [deepspeed_dropless]="--moe.policy=deepspeed --moe.drop_tokens=false"
  [deepspeed_cf1.0]="--moe.policy=deepspeed --moe.capacity_factor=1.0"
  [deepspeed_cf1.25]="--moe.policy=deepspeed --moe.capacity_factor=1.25"
)
policies=(flexmoe fastermoe deepspeed_dropless deepspeed_cf1.0 deepspeed_cf1.25)
for ((rep = 1; rep <= repeats; rep++)); do
  for p in "${policies[@]}"; do
    its=$iterations
    [[ $p == deepspeed_cf* ]] && its=$((2 * iterations))
    echo "bench_moe_skewed: $p, repeat $rep of $repeats ($its iterations)"
    # shellcheck disable=SC2086
    train "$p.$rep" "$its" ${flags[$p]} --moe.replay_trace="$runs/trace" "$@"
  done
done
rm -f "$runs"/trace.rank*  # 1 MB a rank, per token; the counts stay in record.jsonl
# The simulator on the same routing (the recording run's counts, its first `iterations` steps for
# the dropless policies), with the constants flexmoe measured; both exchange schedules.
read -r gemm bandwidth allreduce latency < <(/usr/bin/python3 - "$runs" <<'PY'
import glob, json, statistics, sys
c = [json.load(open(p))["cost_constants"] for p in glob.glob(f"{sys.argv[1]}/flexmoe.*.json")]
print(*(statistics.median(x[k] for x in c) for k in ("gemm_flops", "alltoall_bandwidth", "allreduce_bandwidth", "alltoall_latency")))
PY
)
head -n "$iterations" "$runs/record.jsonl" >"$runs/routing.jsonl"
for cf in 0 1.0 1.25; do
  "$build_dir/apps/placement_sim" --sim.trace="$runs/routing.jsonl" --sim.gpus=2 --sim.scaling= \
    --sim.hidden="$(config_value model d_model)" --sim.ffn_hidden="$(config_value moe d_ff)" --sim.stages=2 \
    --sim.capacity_factor=$cf --placement.slots_per_rank="$(config_value placement slots_per_rank)" \
    --placement.interval="$(config_value placement interval)" --placement.warmup="$(config_value placement warmup)" \
    --placement.gemm_flops="$gemm" --placement.alltoall_bandwidth="$bandwidth" \
    --placement.nvlink_bandwidth="$bandwidth" --placement.allreduce_bandwidth="$allreduce" \
    --placement.alltoall_latency="$latency" --placement.stage_latency="$latency" \
    --output.steps_csv="$runs/sim_cf$cf.steps.csv" | tail -n 1 >"$runs/sim_cf$cf.json"
done
/usr/bin/python3 scripts/bench_moe_skewed_table.py "$out" "$iterations" "$repeats" | tee "$out/table.md"
run_dir_finish
