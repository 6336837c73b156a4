#!/usr/bin/env bash
# The recorded half of issue 35 item 3: the routing of the GPT-, BERT- and Swin-MoE models
# (configs/moe_<model>_trace.ini: the time-to-quality models of configs/moe_<model>_ttq.ini with
# 256 experts, so that they divide over 64 GPUs, and larger batches) recorded while they train at
# 2 ranks (static placement, dropless), then summed over windows of consecutive iterations so
# that each replayed step holds at least TOKENS_PER_GPU (4096) tokens per simulated GPU in every
# MoE layer, and replayed by placement_sim at 64 GPUs (configs/sim_64gpu.ini) under both exchange
# schedules. Summing K consecutive steps gives the counts a K-times-larger batch would give to
# the gates of that stretch of training: the per-expert sampling noise is that of the large batch
# (the variances of independent batches add), while the gates' drift over K steps is averaged
# into one replayed step (the replay's drift is that of the training, compressed K-fold).
# Data: the built-in corpus when data/brown is missing, generated digits when data/mnist is
# missing (as the tests do; nothing is downloaded).
# Writes recorded.csv (per model and schedule: each policy's mean step, FlexMoE's speedups, the
# windows and tokens), recorded.md (the table) and runs/ (metrics, windowed traces, sim JSON).
# Usage: scripts/reproduce_flexmoe_recorded.sh            own run directory (scripts/run_dir.sh:
#          out/reproduce_flexmoe_recorded/<UTC time>/ or OUT; RECORD=1 replaces the claim
#          folder results/moe/scale/recorded/)
#        scripts/reproduce_flexmoe_recorded.sh OUT_DIR BUILD_DIR   (as scripts/reproduce_flexmoe.sh calls it)
# WINDOWS (default 8): replayed steps per model. SMOKE=1: 2 windows of a 1/64 token target
# (64 tokens per GPU), not a measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
standalone=0
if (($# == 0)); then
  standalone=1
  source scripts/run_dir.sh
  run_dir_start reproduce_flexmoe_recorded "SKEW_BUILD_DIR WINDOWS"
  out=$RUN_DIR
  run_dir_claim results/moe/scale/recorded "$out"
  build_dir=${SKEW_BUILD_DIR:-build}
else
  out=$1 build_dir=$2
fi
gpus=64 tokens_per_gpu=4096 windows=${WINDOWS:-8}
if [[ ${SMOKE:-0} == 1 ]]; then
  tokens_per_gpu=64 windows=2
fi
source scripts/moe_apps.sh
moe_apps_ready "$build_dir"
runs=$out/runs
mkdir -p "$runs"
python=/usr/bin/python3
text_data=() image_data=()
[[ -f data/brown/train.txt ]] || text_data=(--data.train= --data.valid=)
[[ -f data/mnist/train.csv ]] || image_data=(--data.mnist_dir= --data.generated_images=4000)

for model in gpt bert swin; do
  data=("${text_data[@]}")
  [[ $model == swin ]] && data=("${image_data[@]}")
  # The iterations per window follow from the tokens one iteration routes in the least-fed layer.
  mpirun --oversubscribe -np 2 "$build_dir/apps/moe_train" --output.dir= --config "configs/moe_${model}_trace.ini" \
    ${data[@]+"${data[@]}"} --train.iterations=1 --output.metrics="$runs/${model}_probe.jsonl" >/dev/null
  per_window=$($python scripts/trace_windows.py iterations "$runs/${model}_probe.jsonl" $((gpus * tokens_per_gpu)) \
    "configs/moe_${model}_trace.ini")
  mpirun --oversubscribe -np 2 "$build_dir/apps/moe_train" --output.dir= --config "configs/moe_${model}_trace.ini" \
    ${data[@]+"${data[@]}"} --train.iterations=$((per_window * windows)) --output.metrics="$runs/${model}_train.jsonl" |
    tail -n 1 >"$runs/${model}_train.json"
  $python scripts/trace_windows.py sum "$runs/${model}_train.jsonl" "$per_window" "$runs/${model}_windows.jsonl"
  "$build_dir/apps/placement_sim" --config configs/sim_64gpu.ini --sim.trace="$runs/${model}_windows.jsonl" \
    --sim.gpus=$gpus --sim.scaling= --output.plans="$runs/${model}_sim.plans.jsonl" | tail -n 1 >"$runs/${model}_sim.json"
done
$python scripts/trace_windows.py table "$out" $gpus | tee "$out/recorded.md"
if ((standalone)); then run_dir_finish; fi
