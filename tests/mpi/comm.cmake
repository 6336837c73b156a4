# Process-group tests under mpirun with 1, 2 and 4 ranks (collectives, groups, device-buffer
# staging and the hybrid group's routing on fake device memory), and the failure rule of run_main.
skew_mpi_test(skew_comm_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_collectives.cpp ${CMAKE_CURRENT_LIST_DIR}/test_comm_groups.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_comm_staging.cpp ${CMAKE_CURRENT_LIST_DIR}/test_comm_hybrid.cpp
  LIBS skew_comm
  NP 1 2 4)

# run_main: a rank throwing alone prints "rank R: error: ..." and the job exits non-zero promptly
# (timeout 20 s: a hang shows up as exit 124 and fails the test; a single rank fails alike with
# itself, so prints "error: ..."); a body's return code becomes the exit code; the runtime fields
# are consistent.
add_executable(skew_comm_abort_helper ${CMAKE_CURRENT_LIST_DIR}/test_comm_abort_helper.cpp)
target_link_libraries(skew_comm_abort_helper PRIVATE skew_comm skew_warnings)
set(skew_mpirun ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS} --oversubscribe ${MPIEXEC_NUMPROC_FLAG})
foreach(np 1 2)
  math(EXPR last_rank "${np} - 1")
  set(failure_line "rank ${last_rank}: error: deliberate failure on the last rank")
  if(np EQUAL 1)
    set(failure_line "^error: deliberate failure on the last rank")
  endif()
  add_test(NAME skew_comm_rank_failure_np${np}
           COMMAND sh -c "out=$(timeout 20 \"$0\" \"$@\" 2>&1); rc=$?; echo \"$out\"; echo \"exit code $rc\"; [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo \"$out\" | grep -q '${failure_line}'"
                   ${skew_mpirun} ${np} $<TARGET_FILE:skew_comm_abort_helper> throw)
  add_test(NAME skew_comm_exit_code_np${np}
           COMMAND sh -c "timeout 20 \"$0\" \"$@\"; rc=$?; echo \"exit code $rc\"; [ $rc -eq 3 ]"
                   ${skew_mpirun} ${np} $<TARGET_FILE:skew_comm_abort_helper> exit3)
  add_test(NAME skew_comm_runtime_np${np} COMMAND ${skew_mpirun} ${np} $<TARGET_FILE:skew_comm_abort_helper> ok)
  set_tests_properties(skew_comm_rank_failure_np${np} skew_comm_exit_code_np${np} skew_comm_runtime_np${np} PROPERTIES
    TIMEOUT 60 PROCESSORS ${np}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
set_tests_properties(skew_comm_runtime_np2 PROPERTIES PASS_REGULAR_EXPRESSION "rank 1 of 2, local 1 of 2")

# Every rank failing alike (a config error each rank finds): one line, "error: ...", from rank 0
# alone, no rank prefix, no MPI_Abort banner, exit status 1. Every rank failing differently:
# each rank's own line with its rank, and no MPI_Abort either (no rank is left waiting).
foreach(np 2 3)
  add_test(NAME skew_comm_agreed_failure_np${np}
           COMMAND sh -c "out=$(timeout 20 \"$0\" \"$@\" 2>&1); rc=$?; echo \"$out\"; echo \"exit code $rc\"; [ $rc -eq 1 ] && [ \"$(echo \"$out\" | grep -c 'error:')\" -eq 1 ] && echo \"$out\" | grep -q '^error: deliberate failure on every rank$' && ! echo \"$out\" | grep -q MPI_ABORT"
                   ${skew_mpirun} ${np} $<TARGET_FILE:skew_comm_abort_helper> throw_all)
  math(EXPR last_rank "${np} - 1")
  add_test(NAME skew_comm_differing_failures_np${np}
           COMMAND sh -c "out=$(timeout 20 \"$0\" \"$@\" 2>&1); rc=$?; echo \"$out\"; echo \"exit code $rc\"; [ $rc -eq 1 ] && [ \"$(echo \"$out\" | grep -c '^rank [0-9]: error: deliberate failure number [0-9]$')\" -eq ${np} ] && echo \"$out\" | grep -q '^rank ${last_rank}: error: deliberate failure number ${last_rank}$' && ! echo \"$out\" | grep -q MPI_ABORT"
                   ${skew_mpirun} ${np} $<TARGET_FILE:skew_comm_abort_helper> throw_each)
  set_tests_properties(skew_comm_agreed_failure_np${np} skew_comm_differing_failures_np${np} PROPERTIES
    TIMEOUT 60 PROCESSORS ${np}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()

# A process started without a launcher (a singleton) gets Open MPI's quick start
# (mpi/launch_check.hpp): ob1, hwloc without PCI discovery and an isolated singleton in a private
# session base, removed at exit (also on an error, and with 8 started together); a user's own
# choice is kept; a launched rank gets none of it.
foreach(mode private concurrent error_exit user)
  add_test(NAME skew_comm_singleton_${mode}
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/singleton_start_test.sh $<TARGET_FILE:skew_comm_abort_helper> ${mode})
  set_tests_properties(skew_comm_singleton_${mode} PROPERTIES PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
add_test(NAME skew_comm_launched_rank_untouched COMMAND env -u OMPI_MCA_pml ${skew_mpirun} 1 $<TARGET_FILE:skew_comm_abort_helper> env)
set_tests_properties(skew_comm_launched_rank_untouched PROPERTIES
  PASS_REGULAR_EXPRESSION "pml=unset isolated=unset .* hwloc=unset")
set_tests_properties(skew_comm_singleton_private skew_comm_singleton_concurrent skew_comm_singleton_error_exit
  skew_comm_singleton_user skew_comm_launched_rank_untouched
  PROPERTIES TIMEOUT 60
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")

# skew_commbench end to end: every row's result matches the closed form, for each backend that
# runs here (MPI), at 2 ranks and 3 ranks (uneven alltoallv shares), with a JSONL copy.
foreach(np 2 3)
  add_test(NAME skew_commbench_np${np}
           COMMAND ${skew_mpirun} ${np} $<TARGET_FILE:skew_commbench> --config ${PROJECT_SOURCE_DIR}/configs/commbench.ini
                   --bench.max_bytes=4096 --bench.iters=3 --bench.warmup=1 --bench.dtype=int64 --bench.redop=avg
                   --output.csv=${CMAKE_CURRENT_BINARY_DIR}/commbench_np${np}.csv
                   --output.metrics=${CMAKE_CURRENT_BINARY_DIR}/commbench_np${np}.jsonl)
  set_tests_properties(skew_commbench_np${np} PROPERTIES TIMEOUT 60 PROCESSORS ${np}
    PASS_REGULAR_EXPRESSION "# Out of bounds values : 0 OK"
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
# Skewed alltoallv (rank 0 receives most, as a hot expert's rank does): still exact at 3 ranks.
add_test(NAME skew_commbench_zipf_np3
         COMMAND ${skew_mpirun} 3 $<TARGET_FILE:skew_commbench> --config ${PROJECT_SOURCE_DIR}/configs/commbench.ini
                 --bench.op=alltoallv --bench.alltoallv_zipf=1.5 --bench.min_bytes=4 --bench.max_bytes=65536
                 --bench.iters=3 --bench.warmup=1 --output.csv=)
set_tests_properties(skew_commbench_zipf_np3 PROPERTIES TIMEOUT 60 PROCESSORS 3
  PASS_REGULAR_EXPRESSION "\"alltoallv_zipf\":1.5,.*\"wrong\":0,"
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
