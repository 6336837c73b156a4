#!/usr/bin/env bash
# Runs HERE (Debian bookworm, x86-64), before a device call: downloads the Debian packages the
# device image lacks (it has nvcc, CMake, ninja, g++, PyTorch; no MPI, Boost, OpenBLAS, Catch2,
# nlohmann-json) into the carried folder .devdeps/, ignored through .git/info/exclude.
# scripts/device_check.sh unpacks them there with dpkg -x into a private prefix, never into /.
# The list is the runtime closure of the libraries we link (checked with ldd in a clean prefix),
# not apt's full closure: that pulls compilers and Fortran through alternatives. Base libraries
# every image has (libc6, libstdc++6, libgcc-s1, zlib1g) stay out; libudev1 (hwloc needs it) is carried;
# the device run checks with ldd that nothing is left unresolved.
#   scripts/device/prepare.sh            download (idempotent) and print the size
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.devdeps
packages=(
  # MPI (mpirun, mpicxx wrapper, libmpi and what it loads)
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2
  libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2 libltdl7 libpciaccess0
  libxnvctrl0 libudev1
  # Boost.Program_options (headers + library)
  libboost-program-options-dev libboost-program-options1.74-dev libboost-program-options1.74.0
  libboost1.74-dev
  # OpenBLAS (pthread flavour: the one the CPU GEMM links here too) and its Fortran runtime
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0 libgfortran5 libquadmath0
  # header-only test and JSON libraries
  catch2 nlohmann-json3-dev)
grep -qx "/$dest/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo "/$dest/" >>.git/info/exclude; }
mkdir -p "$dest"
missing=()
for p in "${packages[@]}"; do
  compgen -G "$dest/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  (cd "$dest" && apt-get download "${missing[@]}")
fi
# Plain file names for the transfer to the device ('%3a' epochs, '+', '~' become '_').
for f in "$dest"/*.deb; do
  safe="$(basename "$f" | tr -c 'A-Za-z0-9._\n-' '_')"
  [[ "$safe" == "$(basename "$f")" ]] || mv -f "$f" "$dest/$safe"
done
# Keep one version of each package (a stale one from an older apt index would unpack twice).
for p in "${packages[@]}"; do
  ls -t "$dest/${p}_"*.deb | tail -n +2 | xargs -r rm -f
done
# NCCL's header, in case the device's NCCL (PyTorch's wheel) came without one: the API is stable
# across NCCL 2.x, and the library itself is the device's.
if [[ -f /usr/local/cuda/include/nccl.h ]]; then mkdir -p "$dest/include" && cp /usr/local/cuda/include/nccl.h "$dest/include/"; fi
echo "prepare: ${#packages[@]} packages in $dest, $(du -sm "$dest" | cut -f1) MiB (device tree limit 64 MiB)"
