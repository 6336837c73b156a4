skew_cuda_test(skew_wide_cuda_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wide_cuda.cpp LIBS skew_wide)
