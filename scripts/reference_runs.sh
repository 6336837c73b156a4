#!/usr/bin/env bash
# Reference runs for structure work: each app under each policy / model / schema / sync mode,
# on 1 and 2 ranks, small enough for 2 cores (a few minutes in all). Every deterministic output
# (saved models, checkpoints, --predict scores, simulator curves and tables) is hashed into
# OUT_DIR/digests.txt, one "sha256  run/file" line each, so two builds compare with diff:
#   scripts/reference_runs.sh BUILD_DIR OUT_DIR
#   diff OUT_BEFORE/digests.txt OUT_AFTER/digests.txt   # empty: bit-identical
#   scripts/reference_runs.sh BUILD_DIR OUT_DIR '^wide_'  # only the runs whose name matches
# Timing-dependent outputs (metrics, summaries, preduce's wall-clock totals, asynchronous preduce
# modes on real ranks) are not hashed; the asynchronous modes are covered by the simulator, which
# runs on a virtual clock.
set -euo pipefail
[[ $# -eq 2 || $# -eq 3 ]] || { echo "usage: $0 BUILD_DIR OUT_DIR [NAME_REGEX]" >&2; exit 2; }
only=${3:-.}
build=$(realpath "$1")
out=$2
mkdir -p "$out"
out=$(realpath "$out")
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
launch() {  # launch RANKS APP ARGS...
  local np=$1
  shift
  # The trainers' default run directory (output.dir = auto) is off: each run writes only the
  # outputs it names, into $out, as before the run directory existed.
  local no_run_dir=()
  [[ $1 == *_train ]] && no_run_dir=(--output.dir=)
  if ((np == 1)); then
    "$build/apps/$@" "${no_run_dir[@]}"
  else
    mpirun --oversubscribe -np "$np" "$build/apps/$@" "${no_run_dir[@]}"
  fi
}
run() {  # run NAME RANKS APP ARGS...: output to $out/NAME, its log beside it
  local name=$1
  shift
  [[ $name =~ $only ]] || return 0
  mkdir -p "$out/$name"
  if ! launch "$@" >"$out/$name.log" 2>&1; then
    echo "reference_runs: $name failed (log: $out/$name.log)" >&2
    tail -5 "$out/$name.log" >&2
    exit 1
  fi
  echo "reference_runs: $name"
}

wide_data="synthetic:criteo?rows=3000&features=4000&alpha=1.1&seed=3"
wide_valid="synthetic:criteo?rows=800&features=4000&alpha=1.1&seed=3&first_row=100000"
for model in lr fm ffm; do
  for schema in classical flow; do
    for np in 1 2; do
      name=wide_${model}_${schema}_np$np
      # Flow trains the same model at any thread count; classical's atomic adds on several ranks
      # sum in thread order, so it runs one thread a rank here.
      threads=$np
      [[ $schema == classical ]] && threads=1
      run "$name" "$np" wide_train --data.train="$wide_data" --data.valid="$wide_valid" --model.type=$model \
        --model.k=4 --train.schema=$schema --train.epochs=2 --train.batch_size=256 --train.threads=$threads \
        --output.model="$out/$name/model.safetensors"
    done
  done
  [[ -f $out/wide_${model}_flow_np1/model.safetensors ]] || continue
  run wide_${model}_predict 1 wide_train --predict --predict.model="$out/wide_${model}_flow_np1/model.safetensors" \
    --predict.data="$wide_valid" --predict.output="$out/wide_${model}_predict/scores.txt"
done

# fastermoe and flexmoe decide on a cost model measured at start-up unless its constants are
# given: fixed here, so their decisions (and the checkpointed constants) do not depend on timing.
fixed_costs=(--placement.gemm_flops=2e10 --placement.alltoall_bandwidth=1e9 --placement.nvlink_bandwidth=4e9
             --placement.allreduce_bandwidth=1e9 --placement.alltoall_latency=2e-5)
for arch in gpt bert swin; do
  for policy in static deepspeed fastermoe flexmoe; do
    for np in 1 2; do
      name=moe_${arch}_${policy}_np$np
      extra=()
      [[ $arch == swin ]] && extra=(--config configs/moe_swin.ini --data.mnist_dir= --data.generated_images=200 --output.metrics=)
      [[ $arch == bert ]] && extra=(--config configs/moe_bert.ini)
      run "$name" "$np" moe_train "${extra[@]}" --model.arch=$arch --moe.policy=$policy --moe.num_experts=4 \
        --train.iterations=6 --train.eval_interval=3 --train.batch_size=4 --output.checkpoint_dir="$out/$name" \
        "${fixed_costs[@]}"
    done
  done
done

for mode in allreduce preduce adpsgd eager local; do
  name=preduce_sim_$mode
  run "$name" 1 preduce_train --simulate --sync.mode=$mode --sim.workers=8 --hetero.slowdown=1,1,1,4 \
    --train.steps=60 --output.curve="$out/$name/curve.csv" --output.checkpoint_dir="$out/$name/ckpt"
done
run preduce_allreduce_np2 2 preduce_train --sync.mode=allreduce --train.steps=40 \
  --output.checkpoint_dir="$out/preduce_allreduce_np2"

run placement_sim 1 placement_sim --config configs/sim.ini --sim.iterations=20 \
  --output.table="$out/placement_sim/table.md" --output.steps_csv="$out/placement_sim/steps.csv" \
  --output.summary_csv="$out/placement_sim/summary.csv" --output.changes="$out/placement_sim/changes.jsonl"

# Hash every file the runs left, except logs and the files that carry wall time; a safetensors
# file tensor by tensor, leaving out preduce's wall-clock totals and series on real ranks (the
# simulator's are virtual time, and hashed).
python3 - "$out" <<'PY' >"$out/digests.txt"
import hashlib, json, os, re, struct, sys
root = sys.argv[1]
for dirpath, _, names in sorted(os.walk(root)):
    for name in sorted(names):
        path = os.path.join(dirpath, name)
        rel = "./" + os.path.relpath(path, root)
        if rel.count("/") < 2 or name.endswith(".log") or name == "summary.json" or re.match(r"metrics.*\.jsonl$", name):
            continue
        data = open(path, "rb").read()
        if not name.endswith(".safetensors"):
            print(hashlib.sha256(data).hexdigest(), rel)
            continue
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        wall_clock = rel.startswith("./preduce_") and not rel.startswith("./preduce_sim_")
        skipped = {t for t in header if wall_clock and re.search(r"\.(totals|series)$", t)}
        meta = {k: v for k, v in header.get("__metadata__", {}).items() if k.split(":", 1)[-1] not in skipped}
        print(hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest(), rel + ":__metadata__")
        for tensor in sorted(t for t in header if t != "__metadata__" and t not in skipped):
            begin, end = header[tensor]["data_offsets"]
            blob = json.dumps(header[tensor], sort_keys=True).encode() + data[8 + n + begin:8 + n + end]
            print(hashlib.sha256(blob).hexdigest(), rel + ":" + tensor)
PY
echo "reference_runs: $(wc -l <"$out/digests.txt") digests in $out/digests.txt"
