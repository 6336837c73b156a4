#!/usr/bin/env bash
# Installs, only when missing, every Debian package that the build, the tests and quickstart
# need. Idempotent: a machine that has everything runs no apt-get at all.
#   scripts/setup.sh            build + test + quickstart packages
#   scripts/setup.sh --bench    also what the reproduce/bench scripts use (plots, liblinear)
#   scripts/setup.sh --fuzz     also clang and its sanitizer/libFuzzer runtimes (fuzz_check.sh)
#   scripts/setup.sh --test     also what every test needs beyond the build (test.sh: matplotlib,
#                               for plot_run.py's drawing test, which skips without it)
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libopenmpi-dev openmpi-bin libboost-program-options-dev
          libopenblas-dev catch2 nlohmann-json3-dev python3 clang-format)
if [[ " $* " == *" --fuzz "* ]]; then
  packages+=(clang libclang-rt-14-dev)
fi
if [[ " $* " == *" --test "* ]]; then
  packages+=(python3-matplotlib)
fi
if [[ " $* " == *" --bench "* ]]; then
  packages+=(python3-numpy python3-matplotlib liblinear-tools time)  # time: /usr/bin/time -v (cost_curve_wide.sh)
  # npm may come with another distribution's nodejs (NodeSource's bundles it and conflicts with
  # Debian's npm package), so the command decides, not the package list.
  command -v npm >/dev/null || packages+=(nodejs npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present"
fi
