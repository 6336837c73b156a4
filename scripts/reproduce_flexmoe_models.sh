#!/usr/bin/env bash
# The FlexMoE paper's per-model table at this scale: GPT-MoE and BERT-MoE on the Brown corpus
# (the built-in corpus when data/brown is missing, as scripts/bench_moe.sh decides) and Swin-MoE on
# MNIST, each trained at 2 ranks under static (dropless), deepspeed (as DeepSpeed ships it:
# capacity factor 1.0, dropping over capacity, random token selection), fastermoe and flexmoe
# with configs/moe_<model>_ttq.ini, to a target quality reached by all: the static run goes first,
# its validation curve fixes the target (the value static reaches at the evaluation nearest 2/3 of
# its iterations: validation loss for gpt and bert, held-out top-1 for swin), which is appended to
# the claim folder's README before any other policy runs. Then each model's routing is recorded
# by a static run with 256 experts (so that it divides over 8, 64 and 256 GPUs) and replayed
# through placement_sim (configs/sim_64gpu.ini's cluster, deepspeed at capacity factor 1.0).
# Writes a run directory (scripts/run_dir.sh: out/reproduce_flexmoe_models/<UTC time>/, or OUT;
# RECORD=1 then replaces the claim folder results/moe/models/ with it): ttq.csv, quality.csv, balance.csv, sim.csv (all
# measured columns are 2-rank wall times on this machine; sim_* columns are simulated),
# quality_<model>.png with matplotlib, and the raw runs in OUT/runs/.
# Usage: scripts/reproduce_flexmoe_models.sh [--smoke] [--out DIR]   (--out DIR: OUT=DIR)
#   --smoke (or SMOKE=1), not a measurement, RECORD=1 refused: 6 iterations per run and 16 validation items on small generated data (the built-in
#   corpus, generated digits), for the test of this script: tests/apps/check_moe_models.py BUILD_DIR
#   (not registered in ctest: 57-110 s on 2 busy cores, over the suite's one-minute budget).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SKEW_BUILD_DIR:-build}
source scripts/run_dir.sh
source scripts/progress.sh
command_args=("$@")
while (($#)); do
  case $1 in
    --smoke) SMOKE=1 ;;
    --out) OUT=$2; shift ;;
    *) echo "usage: $0 [--smoke] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
run_dir_start reproduce_flexmoe_models "SKEW_BUILD_DIR" ${command_args[@]+"${command_args[@]}"}
out=$RUN_DIR
run_dir_claim results/moe/models "$out"
smoke=()
if [[ ${SMOKE:-0} == 1 ]]; then
  smoke=(--train.iterations=6 --train.eval_interval=3 --train.eval_sequences=16 --train.warmup=2)
fi
source scripts/moe_apps.sh
moe_apps_ready "$build_dir"
runs=$out/runs
mkdir -p "$runs"
python=/usr/bin/python3

text_data=()
[[ -f data/brown/train.txt ]] || text_data=(--data.train= --data.valid=)
image_data=()
if ((${#smoke[@]})); then
  text_data=(--data.train= --data.valid= --data.builtin_bytes=20000)
  image_data=(--data.mnist_dir= --data.generated_images=400)
elif [[ ! -f data/mnist/train.csv ]]; then
  scripts/fetch_data.sh mnist
fi

run() {  # model, stem, moe_train flags...
  local model=$1 stem=$2
  shift 2
  local data=("${text_data[@]}")
  [[ $model == swin ]] && data=("${image_data[@]}")
  local quick=()  # the smoke keys this run does not set itself (a key given twice is refused)
  for s in ${smoke[@]+"${smoke[@]}"}; do [[ " $* " == *" ${s%%=*}="* ]] || quick+=("$s"); done
  progress_next "moe_train $stem"
  mpirun --oversubscribe -np 2 "$build_dir/apps/moe_train" --output.dir= --config "configs/moe_${model}_ttq.ini" ${data[@]+"${data[@]}"} \
    ${quick[@]+"${quick[@]}"} --output.metrics="$runs/$stem.jsonl" "$@" | tail -n 1 >"$runs/$stem.json"
  $python scripts/bench_record.py "$runs/$stem.json" 2 "$stem" step_s tokens_per_s final_val_loss dropped
}

[[ -f $out/README.md ]] || printf '# moe_train: time to quality per model and policy\n\n' >"$out/README.md"
progress_begin $((3 * (5 + 3)))  # per model: 5 moe_train runs, 3 placement_sim replays
for model in gpt bert swin; do
  run $model "${model}_static" --moe.policy=static
  # The target is fixed from static's curve and written down before the other policies run.
  $python scripts/plot_results.py choose-moe-target "$out" $model >>"$out/README.md"
  tail -n 1 "$out/README.md"
  for policy in deepspeed fastermoe flexmoe; do
    run $model "${model}_$policy" --moe.policy=$policy
  done
  # Routing to replay at 8, 64 and 256 simulated GPUs: the same training with 256 experts.
  run $model "${model}_trace256" --moe.policy=static --moe.num_experts=256 --train.eval_interval=0
  for gpus in 8 64 256; do
    progress_next "placement_sim ${model}_trace256 at $gpus GPUs"
    "$build_dir/apps/placement_sim" --config configs/sim_64gpu.ini --sim.trace="$runs/${model}_trace256.jsonl" \
      --sim.gpus=$gpus --sim.scaling= --sim.capacity_factor=1.0 | tail -n 1 >"$runs/${model}_sim_$gpus.json"
  done
done
$python scripts/plot_results.py tabulate-moe-models "$out"
if $python -c 'import matplotlib' 2>/dev/null; then $python scripts/plot_results.py moe-models "$out"; fi
if command -v column >/dev/null; then column -s, -t <"$out/ttq.csv"; column -s, -t <"$out/sim.csv"; else cat "$out/ttq.csv" "$out/sim.csv"; fi
run_dir_finish
