# wide_train: data readers and generator, models, gradients, both schemas.
skew_unit_test(skew_wide_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_data.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_model.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_hogwild.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_setup.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_deferred.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_init.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_hashing.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_tile.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_holdout.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_optimizer_isa.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_adagrad_init.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_stream.cpp ${CMAKE_CURRENT_LIST_DIR}/test_wide_cache.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_cache_load.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_wide_threads.cpp
  LIBS skew_wide)
