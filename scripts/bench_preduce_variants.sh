# shellcheck shell=bash
# The preduce_train flags a variant name stands for (sourced by scripts/bench_preduce_hetero.sh
# and scripts/bench_preduce_scale.sh): the name's _-separated parts, each one flag.
#   variant_args preduce_blocking_p4_lr0.8   -> --sync.mode=preduce --preduce.overlap=false ...
# A part left out keeps the preset's value (configs/preduce_mnist.ini).
variant_args() {
  local flags="" part
  IFS=_ read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case $part in
      allreduce) flags+=" --sync.mode=allreduce --train.steps=300" ;;
      preduce | adpsgd | eager) flags+=" --sync.mode=$part" ;;
      # The paper's P-Reduce: the worker waits for its group; no refresh rounds.
      blocking) flags+=" --preduce.overlap=false --preduce.refresh_staleness=0" ;;
      # The project's extension: averaging overlapped with the next step, stale workers refreshed.
      overlap) flags+=" --preduce.overlap=true --preduce.refresh_staleness=3" ;;
      auto) flags+=" --preduce.group_size=0" ;;
      p[0-9]*) flags+=" --preduce.group_size=${part#p}" ;;
      w[0-9]*) flags+=" --preduce.auto_warmup_steps=${part#w}" ;;
      lr*) flags+=" --train.lr=${part#lr}" ;;
      solo | majority) flags+=" --eager.quorum=$part" ;;
      *ms) flags+=" --eager.deadline_ms=${part%ms}" ;;
      *) echo "variant_args: unknown variant part '$part' in '$1'" >&2; return 2 ;;
    esac
  done
  echo "$flags"
}
