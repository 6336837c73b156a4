#!/usr/bin/env bash
# Configures and builds into ${SKEW_BUILD_DIR:-build}. Extra arguments go to cmake's configure
# step (e.g. -DSKEW_CUDA=OFF). CUDA parts are built whenever nvcc is found (SKEW_CUDA=AUTO).
# SKEW_BUILD_TARGETS (space-separated) builds only those targets (quickstart.sh builds its apps).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SKEW_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
read -ra targets <<<"${SKEW_BUILD_TARGETS:-}"
cmake --build "$build_dir" -j "${SKEW_JOBS:-$(nproc)}" ${targets[@]:+--target "${targets[@]}"}
