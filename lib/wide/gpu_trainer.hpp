// WideTrainer's step on a CUDA device (train.device = cuda), internal to it (lib/wide/trainer.cpp
// owns one; nothing else includes this header): parameters, gradient and optimiser state live on
// the GPU; each mini-batch is copied from pinned host buffers into one of two device
// slots. With overlap on, the next batch's host->device copy runs on a second stream while this
// batch computes (events order the slot reuse); with it off, copy and compute take turns on one
// stream. Gradient kernels: kernels/cuda/wide_gradient.cu (classical or flow, LR/FM/FFM); the
// update: kernels/cuda/wide_update.cu, the same rules and touched rows as the CPU optimiser.
// On several ranks (one GPU each) the batch gradient is summed over the group on the host
// between the gradient kernel and the update (GradientExchange); only the rows the step touched
// cross PCIe, packed in pinned buffers, and the update visits only the touched rows (a list
// built on the device). Built without CUDA, constructing one throws.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/wide_flow.hpp"
#include "kernels/wide_update.hpp"
#include "lib/wide/dataset.hpp"

namespace skew::wide {

class CudaStep {
 public:
  // `n_state`/`z_state`: the optimiser's starting per-coordinate state (empty when it has none).
  CudaStep(const kernels::WideShape& shape, bool flow, const kernels::WideFlowOptions& flow_options,
           const kernels::WideUpdateRule& rule, bool overlap, std::span<const float> params,
           const std::vector<float>& n_state, const std::vector<float>& z_state);
  ~CudaStep();
  CudaStep(const CudaStep&) = delete;
  CudaStep& operator=(const CudaStep&) = delete;

  // Several ranks: called between the gradient and the update with host copies of the batch's
  // dense gradient (every parameter), its touched flags (one per feature) and its logits. It
  // makes gradient and flags the group's (sum over ranks, union of touched features) and returns
  // the number of samples the update divides by; both go back to the GPU for the update.
  using GradientExchange = std::function<std::int64_t(std::vector<float>& grad, std::vector<std::uint8_t>& touched,
                                                      const std::vector<float>& logits)>;

  // One step on rows [begin, end): gradient, (exchange,) update with scale 1/samples (rows
  // without an exchange), logits back to the host. Rows [next_begin, next_end) (empty when
  // next_begin >= next_end) are the next step's batch, staged now when overlap is on. Returns
  // the seconds the gradient kernel took on the GPU.
  double step(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::int64_t next_begin,
              std::int64_t next_end, std::vector<float>& logits, const GradientExchange& exchange = {});
  // The batch gradient alone (for tests): grad has every parameter; nothing is updated.
  void gradient(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::vector<float>& grad,
                std::vector<float>& logits);
  void upload(std::span<const float> params);
  void download(std::span<float> params);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace skew::wide
