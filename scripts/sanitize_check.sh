#!/usr/bin/env bash
# Builds the whole tree and its tests with AddressSanitizer + UndefinedBehaviorSanitizer (GCC,
# CUDA off, -O1 with line tables so reports have file:line) into ${SKEW_ASAN_BUILD_DIR:-build-asan}
# and runs every ctest test, MPI tests included. The first sanitizer report fails its test.
# Extra arguments go to ctest (e.g. -R wide).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${SKEW_ASAN_BUILD_DIR:-build-asan}
SKEW_BUILD_DIR=$build scripts/build.sh -DSKEW_CUDA=OFF -DSKEW_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" "-DCMAKE_C_FLAGS_DEBUG=-O1 -g1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Leaks are checked, except those of Open MPI and its libraries (scripts/lsan.supp). Those are
# allocated in plugins that Open MPI and PMIx unload before LeakSanitizer looks, and in libraries
# built without frame pointers: keep the plugins loaded and unwind slowly, or the suppressions
# cannot see them.
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=1:strict_init_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
ctest --output-on-failure -j "${SKEW_TEST_JOBS:-2}" --timeout 1800 "$@"
