# The bench and reproduce scripts' default runs (SMOKE=1) write to out/, never into results/;
# RECORD=1 replaces a claim folder whole, its README kept (scripts/run_dir.sh). Skipped (77)
# outside a git checkout.
add_test(NAME scripts_keep_results
         COMMAND ${PROJECT_SOURCE_DIR}/tests/apps/check_scripts_keep_results.sh ${CMAKE_BINARY_DIR})
set_tests_properties(scripts_keep_results PROPERTIES TIMEOUT 180 PROCESSORS 2 SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
# scripts/progress.sh, the scripts' "[n/N] name ... elapsed, ETA" line, on a fake clock against
# the closed form of its ETA.
add_test(NAME scripts_progress_line COMMAND ${PROJECT_SOURCE_DIR}/tests/apps/check_progress_sh.sh)
set_tests_properties(scripts_progress_line PROPERTIES TIMEOUT 30 PASS_REGULAR_EXPRESSION "PASS" FAIL_REGULAR_EXPRESSION "FAIL")
# scripts/bench_record.py, the bench scripts' per-run record and line: significant digits, the
# machine (CPU model, load averages) stamped into the run's summary, the load warning.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME scripts_bench_record COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/apps/check_bench_record.py)
  set_tests_properties(scripts_bench_record PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "PASS")
endif()
# scripts/bench_preduce_scale.sh's smoke run (8 workers, one scenario per set, 0.3 s): its lr and
# structure stages, the tuned settings and the held-out table with both P-Reduce rows, written
# to a run directory in the build tree (never results/). Skipped without data/mnist (no download
# in a test).
add_test(NAME scripts_bench_preduce_scale_smoke
         COMMAND bash -c "[ -s \"$4/data/mnist/train.csv\" ] || { echo 'SKIPPED: no data/mnist (scripts/fetch_data.sh mnist)'; exit 0; }; rm -rf \"$1\" && SMOKE=1 OUT=\"$1\" \"$2\" \"$3\"" _
                 ${CMAKE_BINARY_DIR}/bench_preduce_scale_smoke ${PROJECT_SOURCE_DIR}/scripts/bench_preduce_scale.sh
                 ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_bench_preduce_scale_smoke PROPERTIES TIMEOUT 240 PROCESSORS 2 SKIP_REGULAR_EXPRESSION "SKIPPED:"
                     PASS_REGULAR_EXPRESSION "tuned preduce_overlap: .*\\| \\*\\*worst\\*\\* \\|.*written to")
# scripts/bench_preduce_comm.sh's smoke run (4 real ranks on generated clusters, a 2048-wide MLP,
# 3 s runs): every mode measured and predicted, each prediction within 3x of the measured time,
# the simulator's constants from the no-straggler calibration runs only, written before any
# measured run (tests/apps/check_preduce_comm.py); to a run directory in the build tree.
if(Python3_FOUND)
  add_test(NAME scripts_bench_preduce_comm_smoke
           COMMAND bash -c "rm -rf \"$1\" && SMOKE=1 OUT=\"$1\" \"$2\" \"$3\" >/dev/null && \"$4\" \"$5\" \"$1\"" _
                   ${CMAKE_BINARY_DIR}/bench_preduce_comm_smoke ${PROJECT_SOURCE_DIR}/scripts/bench_preduce_comm.sh
                   ${CMAKE_BINARY_DIR} ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/apps/check_preduce_comm.py)
  set_tests_properties(scripts_bench_preduce_comm_smoke PROPERTIES TIMEOUT 120 PROCESSORS 2 PASS_REGULAR_EXPRESSION "PASS:"
                       FAIL_REGULAR_EXPRESSION "FAIL:")
endif()
# scripts/bench_moe_skewed.sh's smoke run (issue 35 item 4; 4-iteration runs, about 30 s): every
# policy's row carries a measured step and placement_sim's prediction of it under both exchange
# schedules, and the run directory is under the build tree (never results/).
add_test(NAME scripts_bench_moe_skewed_smoke
         COMMAND bash -c "rm -rf \"$1\" && log=$(SMOKE=1 OUT=\"$1\" SKEW_BUILD_DIR=\"$2\" \"$3\" 2>&1) || { echo \"$log\"; exit 1; }; echo \"$log\"; for p in flexmoe fastermoe deepspeed_dropless deepspeed_cf1.0 deepspeed_cf1.25; do grep -Eq \"^\\| $p \\| [0-9.]+ \\| [0-9]+% \\| [0-9.]+ \\| [0-9.]+ / [0-9.]+ \\| [0-9.]+ / [0-9.]+ \\| -?[0-9]+% / -?[0-9]+% \\|\" \"$1/table.md\" || { echo \"FAIL: no measured and predicted row for $p\"; exit 1; }; done; echo PASS" _
                 ${CMAKE_BINARY_DIR}/bench_moe_skewed_smoke ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR}/scripts/bench_moe_skewed.sh)
set_tests_properties(scripts_bench_moe_skewed_smoke PROPERTIES TIMEOUT 120 PROCESSORS 2 PASS_REGULAR_EXPRESSION "PASS"
                     FAIL_REGULAR_EXPRESSION "FAIL")
