// The classical schema: the textbook per-sample loop over CSR. Each sample gathers the rows of
// its features, predicts, and scatters its gradient straight into the global gradient array
// (atomic adds when several threads share it). It is the baseline the flow schema is measured
// against, and the forward pass used for evaluation.
#pragma once
#include "kernels/wide_model.hpp"
#include "kernels/wide_pool.hpp"

namespace skew::kernels {

// logits[i] = model output of sample i (before the sigmoid).
void wide_forward(const WideShape& shape, const WideBatch& batch, const float* params, float* logits,
                  WidePool& pool);

// grad += sum over samples of d logloss / d params (grad has shape.num_params() floats);
// logits as above. Parameters are read-only during the batch (mini-batch semantics).
void wide_classical_gradient(const WideShape& shape, const WideBatch& batch, const float* params,
                             float* grad, float* logits, WidePool& pool);

#if defined(SKEW_WITH_CUDA)
// CUDA twin: all pointers are device pointers (batch included); one thread per sample,
// global atomics for the gradient scatter (LR, FM and FFM).
void wide_classical_gradient_cuda(const WideShape& shape, const WideBatch& batch, const float* params,
                                  float* grad, float* logits, void* stream);
#endif

}  // namespace skew::kernels
