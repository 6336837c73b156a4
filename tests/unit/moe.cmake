# MoE building blocks: op and gate backward vs finite differences, gate vs float64, kernels; BERT's
# masking rule; the [placement] config keys.
skew_unit_test(skew_moe_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_placement_config.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_bert_mask.cpp
  LIBS skew_moe)
