#!/usr/bin/env bash
# The device check of issue 7, run on the lent GPU machine (the device tool's `run`), in one call:
#   1. unpack the carried Debian packages (.devdeps/, made here by scripts/device/prepare.sh)
#      into a private prefix (MPI, Boost.Program_options, OpenBLAS, Catch2, nlohmann-json; the
#      device image has none of them) and find NCCL (CUDA's folder, else PyTorch's wheel);
#   2. configure with CUDA on (sm_90, Release) and build only the CUDA tests (every
#      skew_cuda_test / skew_mpi_test in tests/cuda/*.cmake) and the GPU benchmarks;
#   3. run those tests with ctest, then wide_gpu_bench and moe_gpu_bench (its kernel rows, then
#      issue 19's whole GPT-MoE model step in a second call), then the PyTorch baselines on the
#      same data and shapes (scripts/device/torch_*.py; torch_gpt_moe.py for the model step);
#   4. print one short table (scripts/device/summarize.py) with the targets of issues 7 and 19.
# The two model-step runs (ours, PyTorch eager) each have a time limit (model_limit_s below), so
# the whole call stays under 8 minutes even where the step is slower than expected; a run cut
# short leaves its row "n/a" and the rest of the table stands.
# Full logs land in $OUT (7 files: env.log build.log ctest.log bench.log torch.log summary.txt
# results.json); without $OUT they go to ./out/device. Sized for ~7 minutes on 16 cores.
#   DEVICE_CHECK_QUICK=1  smaller data and fewer repeats (a smoke run of the whole pipeline)
#   DEVICE_CHECK_COMMIT=HASH  the commit being measured (the device's copy has no .git)
#   DEVICE_CHECK_JOBS=N   build jobs (default: all cores)
#   DEVICE_CHECK_SCOPE=moe  only the MoE parts: the CUDA tests of tests/cuda/{core,moe}.cmake
#                         (with one dense GPT block through lib/moe/ops on the GPU vs the host, and
#                         moe_train's GPT network with train.device=cuda vs cpu at 2 ranks),
#                         moe_gpu_bench (with its row-wise kernels, the dense block's
#                         forward + backward and the GPT-MoE model step), torch_moe.py and
#                         torch_gpt_moe.py; no wide_train build, bench or baseline (under 6 minutes)
#   DEVICE_CHECK_SCOPE=wide  only the wide_train parts: the CUDA tests of tests/cuda/{core,wide}.cmake,
#                         wide_gpu_bench (gradient epochs flow vs classical and training epochs, LR/FM/
#                         FFM) and torch_wide_fm.py; no moe build, bench or baseline (under 3 minutes)
#   DEVICE_CHECK_CMAKE_ARGS="..."  extra configure flags (the dry run here hides the system's
#                         packages with -DCMAKE_IGNORE_PREFIX_PATH="/usr;/")
# Without a GPU the same script still unpacks, configures, builds, runs the tests (they skip)
# and the benchmarks' skip paths: that is how it was dry-run on the CPU-only machine.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/out/device}"
mkdir -p "$out"
build="$root/build-device"
jobs="${DEVICE_CHECK_JOBS:-$(nproc)}"
started=$SECONDS
step() { echo "== device_check [$((SECONDS - started)) s] $*"; }

rows=1000000 repeats=10 moe_repeats=20 torch_repeats=5
# The GPT-MoE model step (issue 19's d1024 model, seq 1024): sequences per step, timed steps
# after one warm-up, and the time limit of each side's run.
model_batch=8 model_steps=5 model_limit_s=100
if [[ "${DEVICE_CHECK_QUICK:-0}" == 1 ]]; then
  rows=100000 repeats=3 moe_repeats=3 torch_repeats=2 model_batch=2 model_steps=2 model_limit_s=60
fi

step "environment"
system_ld_path="${LD_LIBRARY_PATH:-}"
{
  echo "commit ${DEVICE_CHECK_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  date -u
  uname -a
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  g++ --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1
} >"$out/env.log" 2>&1
# The device's copy of the tree has no .git: the caller passes the commit it sent.
commit="${DEVICE_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
device="${device:-no GPU}"

step "unpack carried packages"
# The carried packages are Debian 12's (glibc 2.36): an older C library cannot load them.
glibc="$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
if [[ "$(printf '%s\n' 2.36 "$glibc" | sort -V | head -1)" != 2.36 ]]; then
  echo "glibc $glibc here is older than the 2.36 the carried Debian 12 packages need: build them on a matching image" >&2
  exit 3
fi
eval "$(scripts/device/unpack.sh /tmp/skewdeps)" || { echo "unpack failed"; exit 1; }
nccl_args=()
if ! compgen -G "/usr/local/cuda/lib*/libnccl.so" >/dev/null; then
  # The device image's NCCL is PyTorch's wheel (libnccl.so.2 beside include/nccl.h): link it.
  so="$(find /usr /opt -name 'libnccl.so.2' -path '*nccl*' 2>/dev/null | head -1)"
  header="$(find /usr /opt -name nccl.h 2>/dev/null | head -1)"
  header="${header:-$(compgen -G "$root/.devdeps/include/nccl.h")}"
  if [[ -n "$so" && -n "$header" ]]; then
    mkdir -p /tmp/skewnccl
    ln -sfn "$so" /tmp/skewnccl/libnccl.so
    nccl_args=(-DSKEW_NCCL_LIB=/tmp/skewnccl/libnccl.so -DSKEW_NCCL_INCLUDE="$(dirname "$header")")
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$so")"
    echo "NCCL: $so, $header" >>"$out/env.log"
  else
    echo "NCCL: none found in /usr/local/cuda, /usr or /opt" >>"$out/env.log"
  fi
fi
# Open MPI inside a VM without fabrics: shared memory only, and no ptrace-based single copy.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

step "configure and build (-j$jobs)"
scope="${DEVICE_CHECK_SCOPE:-all}"
test_fragments=(tests/cuda/*.cmake)
[[ "$scope" == moe ]] && test_fragments=(tests/cuda/core.cmake tests/cuda/moe.cmake)
[[ "$scope" == wide ]] && test_fragments=(tests/cuda/core.cmake tests/cuda/wide.cmake)
cuda_tests=($(grep -ho 'skew_\(cuda\|mpi\)_test([A-Za-z0-9_]*' "${test_fragments[@]}" | sed 's/.*(//'))
targets=("${cuda_tests[@]}")
[[ "$scope" == wide ]] || targets+=(moe_gpu_bench)
[[ "$scope" == moe ]] || targets+=(wide_gpu_bench)
# shellcheck disable=SC2086  # SKEW_DEPS_CMAKE_ARGS is a list of -D flags
{
  cmake -S . -B "$build" -G Ninja -DSKEW_CUDA=ON -DSKEW_CUDA_ARCHS=90 -DSKEW_WERROR=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 $SKEW_DEPS_CMAKE_ARGS ${DEVICE_CHECK_CMAKE_ARGS:-} "${nccl_args[@]}" &&
    cmake --build "$build" -j"$jobs" --target "${targets[@]}"
} >"$out/build.log" 2>&1
build_rc=$?
echo "build rc $build_rc, targets: ${targets[*]}" | tee -a "$out/build.log"
# Every carried library must resolve: a "not found" here names a package missing from prepare.sh.
for t in "${targets[@]}"; do
  exe="$(find "$build" -type f -name "$t" -perm -u+x | head -1)"
  [[ -n "$exe" ]] && ldd "$exe" | grep "not found" | sed "s|^|$t: |"
done | tee -a "$out/build.log"

step "CUDA tests: ${cuda_tests[*]}"
regex="$(IFS='|'; echo "${cuda_tests[*]}")"
(cd "$build" && ctest -R "^($regex)" --output-on-failure --timeout 180) >"$out/ctest.log" 2>&1
tail -4 "$out/ctest.log"

step "GPU benchmarks"
{
  if [[ "$scope" != moe ]]; then
    "$build/apps/wide_gpu_bench" --bench.data="synthetic:criteo?rows=$rows&features=4194304&alpha=1.1&seed=1" \
      --bench.repeats=$repeats --bench.export=/tmp/wide_fm.safetensors
  fi
  if [[ "$scope" != wide ]]; then
    "$build/apps/moe_gpu_bench" --bench.rows=kernels --bench.repeats=$moe_repeats
    timeout "$model_limit_s" "$build/apps/moe_gpu_bench" --bench.rows=model --bench.model_batch=$model_batch \
      --bench.model_steps=$model_steps || echo "moe_gpu_bench model row: exit $? (124: over its ${model_limit_s} s limit)"
  fi
} >"$out/bench.log" 2>&1
grep -v '^{' "$out/bench.log" | tail -6

step "PyTorch baselines"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  {
    if [[ "$scope" != moe ]]; then
      LD_LIBRARY_PATH="$system_ld_path" PYTHONUNBUFFERED=1 python3 scripts/device/torch_wide_fm.py /tmp/wide_fm.safetensors --repeats $torch_repeats
    fi
    if [[ "$scope" != wide ]]; then
      LD_LIBRARY_PATH="$system_ld_path" PYTHONUNBUFFERED=1 python3 scripts/device/torch_moe.py --repeats $moe_repeats
      LD_LIBRARY_PATH="$system_ld_path" PYTHONUNBUFFERED=1 timeout "$model_limit_s" python3 \
        scripts/device/torch_gpt_moe.py --batch $model_batch --repeats $model_steps ||
        echo "torch_gpt_moe.py: exit $? (124: over its ${model_limit_s} s limit)"
    fi
  } >"$out/torch.log" 2>&1
else
  echo "PyTorch with CUDA not available: baselines skipped" | tee "$out/torch.log"
fi

step "summary"
python3 scripts/device/summarize.py "$out" "$commit" "$device" "$scope"
summary_rc=$?
step "done (build rc $build_rc, targets met rc $summary_rc)"
exit $((build_rc != 0 ? 2 : summary_rc))
