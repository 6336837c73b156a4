// One cuBLAS handle per host thread, shared by every kernel that calls cuBLAS.
#pragma once
#include <cublas_v2.h>

namespace skew::kernels::cuda {
cublasHandle_t cublas_handle();
}  // namespace skew::kernels::cuda
