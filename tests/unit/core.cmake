# Foundation tests: config, tensor, device array, rng, safetensors, checkpoints, metrics, gemm (fp32 and the bf16 kernel), errors, log, file helpers and progress lines.
skew_unit_test(skew_core_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_core_config.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_tensor.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_device_array.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_rng.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_safetensors.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_checkpoint.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_checkpoint_verify.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_metrics.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_gemm.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_gemm_bf16.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_log.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_fileio.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_limits.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_core_progress.cpp
  LIBS skew_core skew_kernels)
