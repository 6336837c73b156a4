// CUDA test cases start with SKEW_REQUIRE_GPU(): without a visible device the case passes
// vacuously and prints the SKIPPED line that ctest turns into a skip.
#pragma once
#include <cstdio>

#include "core/tensor.hpp"

#define SKEW_REQUIRE_GPU()                                                \
  do {                                                                    \
    if (::skew::cuda_device_count() == 0) {                               \
      std::printf("SKIPPED: no CUDA device visible; test needs a GPU\n"); \
      return;                                                             \
    }                                                                     \
  } while (0)
