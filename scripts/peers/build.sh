#!/usr/bin/env bash
# Builds wide_train's public peers from source folders outside the repository (issue 36): xLearn
# (aksnzhy/xlearn), LIBFFM (ycjuan/libffm), libFM (srendle/libfm) and LIBLINEAR (cjlin1/liblinear),
# each with its own build files and optimisation flags (xLearn: CMake, -O3 -march=native; LIBFFM:
# its Makefile, -O3 -march=native with SSE and OpenMP; libFM: -O3; LIBLINEAR: -O3). Their code is
# never copied into skew; results/wide/peers/README.md says where each source came from.
#
# usage: scripts/peers/build.sh SRC_DIR [BIN_DIR]
#   SRC_DIR holds xlearn/ libffm/ libfm/ liblinear/ (the repositories' trees; a missing one is
#   skipped with a note); BIN_DIR (default SRC_DIR/../bin) receives xlearn_train, xlearn_predict,
#   ffm-train, ffm-predict, libFM, liblinear-train, liblinear-predict and build-info.txt (the
#   compiler, the CPU, and each peer's flags). Builds happen in BIN_DIR/../build/<peer>, leaving
#   the source folders as they were (but for one note under xlearn below).
set -euo pipefail
[[ $# -ge 1 && $# -le 2 && $1 != -h && $1 != --help ]] || {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
src=$(cd "$1" && pwd)
bin=${2:-$src/../bin}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
build=$bin/../build
mkdir -p "$build"
jobs=${JOBS:-2}
info=$bin/build-info.txt
{
  echo "built $(date -u +%FT%TZ) by scripts/peers/build.sh $src"
  echo "compiler: $(g++ --version | head -1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "cpu flags (SIMD): $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|avx512f|avx512bw|avx512vl)$' | tr '\n' ' ')"
} > "$info"

have() {
  [[ -d $src/$1 ]] && return 0
  echo "peers: $src/$1 missing: $1 not built" | tee -a "$info"
  return 1
}

# xLearn: its CMake build (-O3 -march=native set in its CMakeLists.txt), targets xlearn_train and
# xlearn_predict only. Its demo/CMakeLists.txt copies demo data at configure time; a snapshot
# without the large demo/classification/higgs/higgs-train.csv (a Git LFS-size blob some mirrors
# leave out) gets an empty file there so the configure step passes: no target reads it.
build_xlearn() {
  local higgs=$src/xlearn/demo/classification/higgs/higgs-train.csv
  [[ -d $(dirname "$higgs") && ! -e $higgs ]] && : > "$higgs"
  cmake -S "$src/xlearn" -B "$build/xlearn" -DCMAKE_BUILD_TYPE=Release > "$build/xlearn.cmake.log"
  make -C "$build/xlearn" -j"$jobs" xlearn_train xlearn_predict > "$build/xlearn.make.log"
  cp "$build/xlearn/xlearn_train" "$build/xlearn/xlearn_predict" "$bin/"
  echo "xlearn: CMake Release, its flags -O3 -march=native" >> "$info"
}

# LIBFFM: its Makefile as shipped (-O3 -march=native, -DUSESSE, -DUSEOMP -fopenmp).
build_libffm() {
  rm -rf "$build/libffm" && cp -r "$src/libffm" "$build/libffm"
  make -C "$build/libffm" -j"$jobs" > "$build/libffm.make.log"
  cp "$build/libffm/ffm-train" "$build/libffm/ffm-predict" "$bin/"
  echo "libffm: its Makefile, -O3 -march=native -DUSESSE -DUSEOMP -fopenmp" >> "$info"
}

# libFM: its Makefile as shipped (-O3).
build_libfm() {
  rm -rf "$build/libfm" && cp -r "$src/libfm" "$build/libfm"
  make -C "$build/libfm" libFM > "$build/libfm.make.log"
  cp "$build/libfm/bin/libFM" "$bin/"
  echo "libfm: its Makefile, -O3" >> "$info"
}

# LIBLINEAR: its Makefile as shipped (-O3 -fPIC, its bundled BLAS).
build_liblinear() {
  rm -rf "$build/liblinear" && cp -r "$src/liblinear" "$build/liblinear"
  make -C "$build/liblinear" -j"$jobs" > "$build/liblinear.make.log"
  cp "$build/liblinear/train" "$bin/liblinear-train"
  cp "$build/liblinear/predict" "$bin/liblinear-predict"
  echo "liblinear: its Makefile, -O3" >> "$info"
}

for peer in libffm libfm liblinear xlearn; do
  if have "$peer"; then
    echo "peers: building $peer"
    "build_$peer"
  fi
done
echo "peers: binaries in $bin ($(ls "$bin" | tr '\n' ' '))"
