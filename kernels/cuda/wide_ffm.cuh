// FFM on the GPU, called by the model dispatch of kernels/cuda/wide_gradient.cu (the public
// entry points are wide_classical_gradient_cuda and wide_flow_gradient_cuda).
#pragma once
#include <cuda_runtime.h>

#include "kernels/wide_flow.hpp"

namespace skew::kernels {

void wide_ffm_classical_cuda(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                             float* logits, cudaStream_t stream);
void wide_ffm_flow_cuda(const WideShape& shape, const WideFlowOptions& options, const WideBatch& batch,
                        const float* params, float* grad, float* logits, cudaStream_t stream);

}  // namespace skew::kernels
