// Return-code checks for the CUDA libraries (nccl-tests style). Include only from code built
// with CUDA (SKEW_WITH_CUDA); each wraps one call and throws skew::Error naming call and code.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.hpp"

#define SKEW_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    cudaError_t skew_err_ = (call);                                                       \
    if (skew_err_ != cudaSuccess)                                                         \
      SKEW_THROW("CUDA call " #call " failed: " << cudaGetErrorName(skew_err_) << " ("    \
                                                << cudaGetErrorString(skew_err_) << ")"); \
  } while (0)

#define SKEW_CUBLAS_CHECK(call)                                                               \
  do {                                                                                        \
    cublasStatus_t skew_st_ = (call);                                                         \
    if (skew_st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      SKEW_THROW("cuBLAS call " #call " failed: " << cublasGetStatusName(skew_st_) << " ("    \
                                                  << cublasGetStatusString(skew_st_) << ")"); \
  } while (0)

#define SKEW_NCCL_CHECK(call)                                                                 \
  do {                                                                                        \
    ncclResult_t skew_nr_ = (call);                                                           \
    if (skew_nr_ != ncclSuccess)                                                              \
      SKEW_THROW("NCCL call " #call " failed: code " << static_cast<int>(skew_nr_) << " ("    \
                                                     << ncclGetErrorString(skew_nr_) << ")"); \
  } while (0)
