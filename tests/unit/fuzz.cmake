# Regression tests for inputs the fuzz harnesses (tests/fuzz) or the sanitizer build found: each
# bad input must be rejected with a skew::Error naming the file (and line where there is one).
skew_unit_test(skew_fuzz_regression_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fuzz_regressions.cpp
  LIBS skew_wide skew_placement skew_core)
