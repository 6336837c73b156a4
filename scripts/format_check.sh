#!/usr/bin/env bash
# Fails, listing the files, when any C++/CUDA source differs from .clang-format (clang-format 14,
# which scripts/setup.sh installs). Fix with: scripts/format_check.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format_check: clang-format not found (scripts/setup.sh installs it)" >&2; exit 1; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' '*.c' | grep -v '^tests/fuzz/corpus/')
else
  mapfile -t files < <(find core kernels mpi lib apps tests -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.h' -o -name '*.c' \) ! -path 'tests/fuzz/corpus/*' | sort)
fi
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
# One clang-format process for the whole tree; it names each differing file in its warnings.
mapfile -t bad < <(clang-format --dry-run --Werror "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if ((${#bad[@]})); then
  echo "format_check: ${#bad[@]} of ${#files[@]} files differ from .clang-format (fix: scripts/format_check.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format_check: all ${#files[@]} files match .clang-format"
