#include "lib/wide/gpu_trainer.hpp"

#include "core/error.hpp"

#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "core/cuda_check.hpp"
#include "core/device_array.hpp"
#include "kernels/wide_classical.hpp"

namespace skew::wide {

namespace {

// One staged mini-batch: pinned host copy (row offsets rebased to 0) and its device twin.
struct Slot {
  // Set when the slot holds the batch the previous step announced as next (staged ahead);
  // only that promise lets a step skip its own copy.
  const SparseDataset* data = nullptr;
  bool staged_ahead = false;
  std::int64_t begin = -1, end = -1, nnz = 0;
  DeviceArray<std::int64_t> host_row_ptr = DeviceArray<std::int64_t>::pinned(), row_ptr{Device::Cuda};
  DeviceArray<std::uint32_t> host_index = DeviceArray<std::uint32_t>::pinned(), index{Device::Cuda};
  DeviceArray<std::uint16_t> host_field = DeviceArray<std::uint16_t>::pinned(), field{Device::Cuda};
  DeviceArray<float> host_value = DeviceArray<float>::pinned(), value{Device::Cuda};
  DeviceArray<float> host_label = DeviceArray<float>::pinned(), label{Device::Cuda};
  cudaEvent_t copied = nullptr;  // recorded after the slot's copies
};

}  // namespace

struct CudaStep::State {
  kernels::WideShape shape;
  bool flow = true, overlap = true;
  kernels::WideFlowOptions flow_options;
  kernels::WideUpdateRule rule;
  DeviceArray<float> params{Device::Cuda}, grad{Device::Cuda}, n{Device::Cuda}, z{Device::Cuda}, logits{Device::Cuda};
  DeviceArray<float> host_logits = DeviceArray<float>::pinned();
  // The rows this step touched, listed on the device: `touched` points into the three arrays.
  DeviceArray<std::uint32_t> touched_bits{Device::Cuda};
  DeviceArray<std::int64_t> touched_list{Device::Cuda};
  DeviceArray<unsigned long long> touched_count{Device::Cuda};
  kernels::WideTouchedRows touched;
  // Several ranks: the exchange's dense host gradient and flags (zero outside the rows of the
  // step in flight), and the pinned buffers the touched rows cross PCIe in, packed, both ways.
  std::vector<float> host_grad;
  std::vector<std::uint8_t> host_touched;
  DeviceArray<unsigned long long> host_count = DeviceArray<unsigned long long>::pinned();
  DeviceArray<std::int64_t> host_list = DeviceArray<std::int64_t>::pinned();
  DeviceArray<float> host_packed = DeviceArray<float>::pinned(), host_bias = DeviceArray<float>::pinned();
  DeviceArray<float> packed{Device::Cuda};
  cudaStream_t compute = nullptr, copy = nullptr;
  cudaEvent_t kernel_start = nullptr, kernel_stop = nullptr;
  Slot slots[2];
  int next_slot = 0;

  // Copies rows [begin, end) of data into `slot` on `stream` (host fill, then async copies).
  void stage(Slot& s, const SparseDataset& data, std::int64_t begin, std::int64_t end, cudaStream_t stream) {
    const std::size_t rows = std::size_t(end - begin);
    const std::int64_t base = data.row_ptr[std::size_t(begin)];
    const std::size_t nnz = std::size_t(data.row_ptr[std::size_t(end)] - base);
    const bool ffm = shape.kind == kernels::WideKind::FFM;
    SKEW_CUDA_CHECK(cudaEventSynchronize(s.copied));  // the pinned buffers are free again
    s.host_row_ptr.resize_for_overwrite(rows + 1);
    s.host_index.resize_for_overwrite(nnz);
    s.host_value.resize_for_overwrite(nnz);
    s.host_label.resize_for_overwrite(rows);
    s.row_ptr.resize_for_overwrite(rows + 1);
    s.index.resize_for_overwrite(nnz);
    s.value.resize_for_overwrite(nnz);
    s.label.resize_for_overwrite(rows);
    if (ffm) {
      s.host_field.resize_for_overwrite(nnz);
      s.field.resize_for_overwrite(nnz);
    }
    for (std::size_t i = 0; i <= rows; ++i) s.host_row_ptr[i] = data.row_ptr[std::size_t(begin) + i] - base;
    std::memcpy(s.host_index.data(), data.index.data() + base, nnz * sizeof(std::uint32_t));
    std::memcpy(s.host_value.data(), data.value.data() + base, nnz * sizeof(float));
    std::memcpy(s.host_label.data(), data.label.data() + begin, rows * sizeof(float));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(s.row_ptr.data(), s.host_row_ptr.data(), (rows + 1) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(s.index.data(), s.host_index.data(), nnz * sizeof(std::uint32_t),
                                    cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(s.value.data(), s.host_value.data(), nnz * sizeof(float), cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(s.label.data(), s.host_label.data(), rows * sizeof(float), cudaMemcpyHostToDevice, stream));
    if (ffm) {
      std::memcpy(s.host_field.data(), data.field.data() + base, nnz * sizeof(std::uint16_t));
      SKEW_CUDA_CHECK(cudaMemcpyAsync(s.field.data(), s.host_field.data(), nnz * sizeof(std::uint16_t),
                                      cudaMemcpyHostToDevice, stream));
    }
    SKEW_CUDA_CHECK(cudaEventRecord(s.copied, stream));
    s.data = &data;
    s.begin = begin;
    s.end = end;
    s.nnz = std::int64_t(nnz);
  }

  // The slot holding rows [begin, end) if they were staged ahead, else one staged now (on the
  // compute stream).
  Slot& batch_slot(const SparseDataset& data, std::int64_t begin, std::int64_t end) {
    for (Slot& s : slots) {
      const bool match = s.staged_ahead && s.data == &data && s.begin == begin && s.end == end;
      s.staged_ahead = false;
      if (match) return s;
    }
    Slot& s = slots[next_slot];
    next_slot ^= 1;
    stage(s, data, begin, end, compute);
    return s;
  }

  kernels::WideBatch device_batch(const Slot& s) const {
    kernels::WideBatch b;
    b.rows = s.end - s.begin;
    b.row_ptr = s.row_ptr.data();
    b.index = s.index.data();
    b.field = s.field.data();
    b.value = s.value.data();
    b.label = s.label.data();
    return b;
  }

  // Gradient of the batch in `slot` into grad, logits into the device buffer; timed by events.
  // The compute stream must already wait for the slot's `copied` event.
  void launch_gradient(const Slot& s) {
    const kernels::WideBatch b = device_batch(s);
    logits.resize_for_overwrite(std::size_t(std::max<std::int64_t>(1, b.rows)));
    SKEW_CUDA_CHECK(cudaEventRecord(kernel_start, compute));
    if (flow)
      kernels::wide_flow_gradient_cuda(shape, flow_options, b, 0, s.nnz, params.data(), grad.data(), logits.data(),
                                       compute);
    else
      kernels::wide_classical_gradient_cuda(shape, b, params.data(), grad.data(), logits.data(), compute);
    SKEW_CUDA_CHECK(cudaEventRecord(kernel_stop, compute));
  }

  void logits_to_host(std::int64_t rows, std::vector<float>& out) {
    host_logits.resize_for_overwrite(std::size_t(std::max<std::int64_t>(1, rows)));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_logits.data(), logits.data(), std::size_t(rows) * sizeof(float),
                                    cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaStreamSynchronize(compute));
    out.assign(host_logits.data(), host_logits.data() + rows);
  }

  // Several ranks: the step's touched rows and bias go to the host (packed, pinned), into the
  // dense host gradient the exchange sums over the group; the group's rows (the union of the
  // ranks' touched features) come back packed, become the device's list, and are unpacked into
  // the gradient. PCIe carries O(rows touched) each way; the exchange itself is the caller's.
  // Returns the number of samples the update divides by and sets `rows_listed` to the list's
  // length. `count` (host_count) was copied before the logits' synchronisation.
  std::int64_t exchange_rows(const GradientExchange& exchange, const std::vector<float>& logits,
                             std::int64_t& rows_listed) {
    const int row_len = shape.row_len();
    const std::int64_t listed = std::int64_t(host_count[0]);
    const std::size_t packed_len = std::size_t(listed) * std::size_t(row_len);
    packed.resize_for_overwrite(std::max<std::size_t>(1, packed_len));
    host_packed.resize_for_overwrite(std::max<std::size_t>(1, packed_len));
    host_list.resize_for_overwrite(std::size_t(std::max<std::int64_t>(1, listed)));
    kernels::wide_pack_rows_cuda(shape, touched, listed, grad.data(), packed.data(), compute);
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_packed.data(), packed.data(), packed_len * sizeof(float),
                                    cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_list.data(), touched.list, std::size_t(listed) * sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_bias.data(), grad.data(), sizeof(float), cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaStreamSynchronize(compute));
    host_grad.resize(shape.num_params(), 0.0f);
    host_touched.resize(std::size_t(shape.num_features), 0);
    host_grad[0] = host_bias[0];
    for (std::int64_t t = 0; t < listed; ++t) {
      host_touched[std::size_t(host_list[t])] = 1;
      std::copy_n(host_packed.data() + t * row_len, row_len, host_grad.begin() + 1 + host_list[t] * row_len);
    }
    const std::int64_t samples = exchange(host_grad, host_touched, logits);
    // The group's rows, packed; the host arrays are left zero for the next step.
    std::int64_t group_rows = 0;
    for (std::size_t f = 0; f < host_touched.size(); ++f) group_rows += host_touched[f];
    host_list.resize_for_overwrite(std::size_t(std::max<std::int64_t>(1, group_rows)));
    host_packed.resize_for_overwrite(std::max<std::size_t>(1, std::size_t(group_rows) * row_len));
    packed.resize_for_overwrite(std::max<std::size_t>(1, std::size_t(group_rows) * row_len));
    std::int64_t t = 0;
    for (std::size_t f = 0; f < host_touched.size(); ++f) {
      if (!host_touched[f]) continue;
      host_touched[f] = 0;
      host_list[t] = std::int64_t(f);
      float* row = host_grad.data() + 1 + std::int64_t(f) * row_len;
      std::copy_n(row, row_len, host_packed.data() + t * row_len);
      std::fill_n(row, row_len, 0.0f);
      ++t;
    }
    host_bias[0] = host_grad[0];
    host_grad[0] = 0.0f;
    host_count[0] = static_cast<unsigned long long>(group_rows);
    SKEW_CUDA_CHECK(cudaMemcpyAsync(touched.list, host_list.data(), std::size_t(group_rows) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, compute));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(touched.count, host_count.data(), sizeof(unsigned long long), cudaMemcpyHostToDevice, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(packed.data(), host_packed.data(),
                                    std::size_t(group_rows) * row_len * sizeof(float), cudaMemcpyHostToDevice,
                                    compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(grad.data(), host_bias.data(), sizeof(float), cudaMemcpyHostToDevice, compute));
    kernels::wide_unpack_rows_cuda(shape, touched.list, group_rows, packed.data(), grad.data(), compute);
    rows_listed = group_rows;
    return samples;
  }
};

CudaStep::CudaStep(const kernels::WideShape& shape, bool flow, const kernels::WideFlowOptions& flow_options,
                   const kernels::WideUpdateRule& rule, bool overlap, std::span<const float> params,
                   const std::vector<float>& n_state, const std::vector<float>& z_state)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.shape = shape;
  s.flow = flow;
  s.flow_options = flow_options;
  s.rule = rule;
  s.overlap = overlap;
  s.params.assign_from(params.data(), params.size(), Device::Host);
  s.grad.zeros(std::max<std::size_t>(1, params.size()));
  s.n.assign_from(n_state);  // empty (no allocation) when the rule keeps no state
  s.z.assign_from(z_state);
  s.touched_bits.zeros(std::size_t(shape.num_features / 32 + 1));
  s.touched_list.resize_for_overwrite(std::max<std::size_t>(1, std::size_t(shape.num_features)));
  s.touched_count.zeros(1);
  s.touched = {s.touched_bits.data(), s.touched_list.data(), s.touched_count.data()};
  s.host_count.resize_for_overwrite(1);
  s.host_bias.resize_for_overwrite(1);
  SKEW_CUDA_CHECK(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking));
  SKEW_CUDA_CHECK(cudaStreamCreateWithFlags(&s.copy, cudaStreamNonBlocking));
  SKEW_CUDA_CHECK(cudaEventCreate(&s.kernel_start));
  SKEW_CUDA_CHECK(cudaEventCreate(&s.kernel_stop));
  for (Slot& slot : s.slots) SKEW_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
  SKEW_CUDA_CHECK(cudaDeviceSynchronize());  // the initial copies and memset ran on the default stream
}

CudaStep::~CudaStep() {
  State& s = *state_;
  cudaStreamSynchronize(s.compute);
  cudaStreamSynchronize(s.copy);
  for (Slot& slot : s.slots) cudaEventDestroy(slot.copied);
  cudaEventDestroy(s.kernel_start);
  cudaEventDestroy(s.kernel_stop);
  cudaStreamDestroy(s.compute);
  cudaStreamDestroy(s.copy);
}

double CudaStep::step(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::int64_t next_begin,
                      std::int64_t next_end, std::vector<float>& logits, const GradientExchange& exchange) {
  State& s = *state_;
  const std::int64_t rows = end - begin;
  Slot& slot = s.batch_slot(data, begin, end);
  SKEW_CUDA_CHECK(cudaStreamWaitEvent(s.compute, slot.copied, 0));
  kernels::wide_mark_touched_cuda(s.device_batch(slot), 0, slot.nnz, s.touched, s.compute);
  s.launch_gradient(slot);
  std::int64_t samples = rows;
  // Without an exchange the list holds at most the batch's distinct features.
  std::int64_t rows_listed = std::min<std::int64_t>(slot.nnz, s.shape.num_features);
  if (exchange) {
    SKEW_CUDA_CHECK(cudaMemcpyAsync(s.host_count.data(), s.touched.count, sizeof(unsigned long long),
                                    cudaMemcpyDeviceToHost, s.compute));
    s.logits_to_host(rows, logits);  // synchronises: host_count is ready too
    samples = s.exchange_rows(exchange, logits, rows_listed);
  }
  if (samples > 0)
    kernels::wide_update_cuda(s.shape, s.rule, 1.0f / float(samples), s.touched, rows_listed, s.params.data(),
                              s.grad.data(), s.n.data(), s.z.data(), s.compute);
  // The next batch's copy runs on the copy stream while this one computes. Its slot's last
  // user (the previous step) has finished: every step ends with a synchronisation.
  if (s.overlap && next_begin < next_end) {
    Slot& other = &slot == &s.slots[0] ? s.slots[1] : s.slots[0];
    s.stage(other, data, next_begin, next_end, s.copy);
    other.staged_ahead = true;
    s.next_slot = &slot == &s.slots[0] ? 0 : 1;
  }
  if (exchange)
    SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));  // the host buffers are the next step's again
  else
    s.logits_to_host(rows, logits);
  float ms = 0.0f;
  SKEW_CUDA_CHECK(cudaEventElapsedTime(&ms, s.kernel_start, s.kernel_stop));
  return 1e-3 * double(ms);
}

void CudaStep::gradient(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::vector<float>& grad,
                        std::vector<float>& logits) {
  State& s = *state_;
  const Slot& slot = s.batch_slot(data, begin, end);
  SKEW_CUDA_CHECK(cudaStreamWaitEvent(s.compute, slot.copied, 0));
  s.launch_gradient(slot);
  s.logits_to_host(end - begin, logits);
  grad.resize(std::size_t(s.shape.num_params()));
  SKEW_CUDA_CHECK(
      cudaMemcpyAsync(grad.data(), s.grad.data(), grad.size() * sizeof(float), cudaMemcpyDeviceToHost, s.compute));
  SKEW_CUDA_CHECK(
      cudaMemsetAsync(s.grad.data(), 0, grad.size() * sizeof(float), s.compute));  // steps expect a zero gradient
  SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));
}

// Both on the compute stream (non-blocking: it does not order itself after the legacy default
// stream), finished before returning.
void CudaStep::upload(std::span<const float> params) {
  State& s = *state_;
  SKEW_CUDA_CHECK(cudaMemcpyAsync(s.params.data(), params.data(), params.size() * sizeof(float), cudaMemcpyHostToDevice,
                                  s.compute));
  SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));
}

void CudaStep::download(std::span<float> params) {
  State& s = *state_;
  SKEW_CUDA_CHECK(cudaMemcpyAsync(params.data(), s.params.data(), params.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                  s.compute));
  SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));
}

}  // namespace skew::wide

#else  // built without CUDA: WideTrainer refuses train.device = cuda before getting here

namespace skew::wide {

struct CudaStep::State {};

CudaStep::CudaStep(const kernels::WideShape&, bool, const kernels::WideFlowOptions&, const kernels::WideUpdateRule&,
                   bool, std::span<const float>, const std::vector<float>&, const std::vector<float>&) {
  SKEW_THROW("train.device = cuda: this build has no CUDA (configure with -DSKEW_CUDA=ON)");
}
CudaStep::~CudaStep() = default;
double CudaStep::step(const SparseDataset&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::vector<float>&,
                      const GradientExchange&) {
  SKEW_THROW("train.device = cuda: this build has no CUDA");
}
void CudaStep::gradient(const SparseDataset&, std::int64_t, std::int64_t, std::vector<float>&, std::vector<float>&) {
  SKEW_THROW("train.device = cuda: this build has no CUDA");
}
void CudaStep::upload(std::span<const float>) {
  SKEW_THROW("train.device = cuda: this build has no CUDA");
}
void CudaStep::download(std::span<float>) {
  SKEW_THROW("train.device = cuda: this build has no CUDA");
}

}  // namespace skew::wide

#endif
