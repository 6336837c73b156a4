#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs every test with
# ctest. Exits non-zero on any failure. MPI tests run under mpirun --oversubscribe.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
scripts/build.sh "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "${SKEW_BUILD_DIR:-build}"
ctest --output-on-failure -j "${SKEW_TEST_JOBS:-2}" --timeout 900
