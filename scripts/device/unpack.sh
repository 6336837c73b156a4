#!/usr/bin/env bash
# Unpacks the carried Debian packages (.devdeps/, from scripts/device/prepare.sh) into a private
# prefix with dpkg -x, never into /, and makes the links that Debian's maintainer scripts
# (update-alternatives) would have made. Then prints the environment to eval:
#   eval "$(scripts/device/unpack.sh /tmp/skewdeps)"
# which sets SKEW_DEPS (the prefix), OPAL_PREFIX (relocates Open MPI's wrappers and mpirun),
# PATH, LD_LIBRARY_PATH and SKEW_DEPS_CMAKE_ARGS (the cache entries that point CMake there).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"  # no git on the device: its copy has no .git
prefix="${1:?usage: unpack.sh PREFIX}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
shopt -s nullglob
debs=("$root"/.devdeps/*.deb)
((${#debs[@]})) || { echo "unpack: no packages in $root/.devdeps (run scripts/device/prepare.sh here first)" >&2; exit 1; }
for deb in "${debs[@]}"; do dpkg -x "$deb" "$prefix"; done
usr="$prefix/usr"
lib="$usr/lib/x86_64-linux-gnu"
# update-alternatives links: the MPI wrappers and launcher, OpenBLAS as libopenblas/libblas.
for tool in mpicxx mpicc mpirun mpiexec; do ln -sfn "$tool.openmpi" "$usr/bin/$tool"; done
for so in libopenblas.so libopenblas.so.0 libblas.so libblas.so.3 libcblas.so libcblas.so.3; do
  target="$lib/openblas-pthread/$so"
  [[ -e "$target" ]] && ln -sfn "openblas-pthread/$so" "$lib/$so"
done
cat <<EOF
export SKEW_DEPS='$prefix'
export OPAL_PREFIX='$usr'
export PATH='$usr/bin':"\$PATH"
export LD_LIBRARY_PATH='$lib:$lib/openmpi/lib:$lib/openblas-pthread'"\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export SKEW_DEPS_CMAKE_ARGS='-DCMAKE_PREFIX_PATH=$usr -DMPI_CXX_COMPILER=$usr/bin/mpicxx -DMPIEXEC_EXECUTABLE=$usr/bin/mpirun -DSKEW_CBLAS_INCLUDE=$usr/include/x86_64-linux-gnu/openblas-pthread -DBLAS_openblas_LIBRARY=$lib/libopenblas.so'
EOF
