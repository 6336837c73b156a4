# MoE building blocks: op and gate backward vs finite differences, gate and row-wise twins vs
# float64, kernels; the [placement] config keys.
skew_unit_test(skew_moe_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_rowwise.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_placement_config.cpp
  LIBS skew_moe)
