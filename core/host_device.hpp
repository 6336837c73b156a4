// SKEW_HD marks functions that compile for both the host and, under nvcc, the device, so a
// CPU kernel and its CUDA twin can share one definition of their per-element logic.
#pragma once

#if defined(__CUDACC__)
#define SKEW_HD __host__ __device__
#else
#define SKEW_HD
#endif
