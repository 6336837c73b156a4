# MoE building blocks: op and gate backward vs finite differences, gate vs float64, kernels.
skew_unit_test(skew_moe_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_ops.cpp
  LIBS skew_moe)
