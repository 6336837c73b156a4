# MoE building blocks: op and gate backward vs finite differences, gate and row-wise twins vs
# float64, kernels; BERT's masking rule; the [placement] config keys; Swin's layers (window
# partition and shift, mask, relative position bias, patch embedding and merging) against float64
# references; the twins added for GPUs (bias broadcast, column sum, residual add, strided-batched
# GEMM) and one GPT block's float chain against its float64 chain (with DeviceArray); the MoE
# layer's routing, dispatch and combine kernels and the gate's per-token kernels against float64;
# train.device's resolution per GPU count and model.arch.
skew_unit_test(skew_moe_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_rowwise.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_placement_config.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_swin_ops.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_bert_mask.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_device_ops.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_block_ops.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_route.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_gate_kernels.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_train_device.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_moe_expert_gemm.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_lane_sums.cpp
  LIBS skew_moe skew_app_options)
