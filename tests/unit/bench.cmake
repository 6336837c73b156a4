# The benchmarks' tables and machine records (apps/bench): significant digits, alignment, the
# CPU model and load averages, the load warning.
if(TARGET skew_bench)
  skew_unit_test(skew_bench_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_table.cpp LIBS skew_bench)
endif()
