// The classical schema: the textbook per-sample loop over CSR. Each sample gathers the rows of
// its features and predicts; then either its gradient goes into the batch's gradient array
// (atomic adds when several threads share it) for the optimiser to apply once per batch, or
// (Hogwild, what CPU trainers such as libFM, LIBFFM and xLearn do) it updates the model at once,
// threads sharing parameters without locks. It is the baseline the flow schema is measured
// against, and the forward pass used for evaluation.
#pragma once
#include "kernels/wide_model.hpp"
#include "kernels/wide_pool.hpp"
#include "kernels/wide_update.hpp"

namespace skew::kernels {

// logits[i] = model output of sample i (before the sigmoid).
void wide_forward(const WideShape& shape, const WideBatch& batch, const float* params, float* logits, WidePool& pool);

// grad += sum over samples of d logloss / d params (grad has shape.num_params() floats);
// logits as above. Parameters are read-only during the batch (mini-batch semantics).
void wide_classical_gradient(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                             float* logits, WidePool& pool);

// Hogwild training on the batch: for each sample (threads over chunks of samples), its logit
// into logits[i], then the bias and every row the sample touches updated in place by `rule`
// from that sample's gradient alone (`state`: the rule's n/z arrays, laid out like params).
// Threads race on shared rows without locks. At one thread this is the mini-batch run at batch
// size 1 exactly, whatever the batch, given no feature twice in a sample (the mini-batch
// run sums a repeated feature's gradients before its one update).
void wide_classical_hogwild(const WideShape& shape, const WideBatch& batch, const WideUpdateRule& rule, float* params,
                            WideOptimizerState state, float* logits, WidePool& pool);

#if defined(SKEW_WITH_CUDA)
// CUDA twin: all pointers are device pointers (batch included); one thread per sample,
// global atomics for the gradient scatter (LR, FM and FFM).
void wide_classical_gradient_cuda(const WideShape& shape, const WideBatch& batch, const float* params, float* grad,
                                  float* logits, void* stream);
#endif

}  // namespace skew::kernels
