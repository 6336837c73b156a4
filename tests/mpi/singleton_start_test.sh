#!/bin/bash
# The quick singleton start (mpi/launch_check.hpp) end to end, with the test helper HELPER:
#   private     a launcher-less process gets ob1, hwloc without PCI discovery, an isolated
#               singleton and a private session base under $TMPDIR that holds Open MPI's session
#               directory and is gone at exit
#   concurrent  8 singletons started together all succeed, each in its own base, none left
#   error_exit  a singleton that fails (abort_job) removes its base too
#   user        a user's own pml, hwloc components and tmpdir base are kept, and then no
#               isolated singleton
set -u
helper=$1 mode=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
unset OMPI_MCA_pml OMPI_MCA_ess_singleton_isolated OMPI_MCA_orte_tmpdir_base HWLOC_COMPONENTS
fail() { echo "FAIL: $*"; exit 1; }
left() { find "$tmp" -mindepth 1 -maxdepth 1 -name "skew-mpi-*"; }
case $mode in
  private)
    out=$("$helper" env) || fail "helper exited with $?"
    echo "$out"
    [[ $out == *"pml=ob1 isolated=1 tmpdir_base=$tmp/skew-mpi-"* ]] || fail "no private isolated start"
    [[ $out == *" hwloc=-linuxio,-pci"* ]] || fail "hwloc's PCI discovery is on"
    [[ $out == *"session directory in base"* ]] || fail "Open MPI's session directory is not in the private base"
    [[ -z $(left) ]] || fail "left behind: $(left)" ;;
  concurrent)
    for i in 1 2 3 4 5 6 7 8; do "$helper" env >"$tmp/out$i" 2>&1 & done
    failed=0
    for job in $(jobs -p); do wait "$job" || failed=$((failed + 1)); done
    cat "$tmp"/out*
    [[ $failed -eq 0 ]] || fail "$failed of 8 concurrent singletons failed"
    [[ $(grep -ho 'tmpdir_base=[^ ]*' "$tmp"/out* | sort -u | wc -l) -eq 8 ]] || fail "bases not distinct"
    [[ -z $(left) ]] || fail "left behind: $(left)" ;;
  error_exit)
    "$helper" throw >"$tmp/out" 2>&1 && fail "the failing singleton exited 0"
    cat "$tmp/out"
    grep -q "^error: deliberate failure" "$tmp/out" || fail "no error line"
    [[ -z $(left) ]] || fail "left behind: $(left)" ;;
  user)
    out=$(OMPI_MCA_pml=^ucx OMPI_MCA_orte_tmpdir_base=$tmp HWLOC_COMPONENTS=-pci "$helper" env) || fail "helper exited with $?"
    echo "$out"
    [[ $out == *"pml=^ucx isolated=unset tmpdir_base=$tmp hwloc=-pci"* ]] || fail "the user's settings were not kept" ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
