#include "lib/wide/gpu_trainer.hpp"

#include "core/error.hpp"

#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "core/cuda_check.hpp"
#include "kernels/cuda_memory.hpp"
#include "kernels/wide_classical.hpp"

namespace skew::wide {

namespace {

using kernels::cuda::device_alloc;
using kernels::cuda::grow_device;
using kernels::cuda::grow_pinned;

// One staged mini-batch: pinned host copy (row offsets rebased to 0) and its device twin.
struct Slot {
  // Set when the slot holds the batch the previous step announced as next (staged ahead);
  // only that promise lets a step skip its own copy.
  const SparseDataset* data = nullptr;
  bool staged_ahead = false;
  std::int64_t begin = -1, end = -1, nnz = 0;
  std::int64_t *host_row_ptr = nullptr, *row_ptr = nullptr;
  std::uint32_t *host_index = nullptr, *index = nullptr;
  std::uint16_t *host_field = nullptr, *field = nullptr;
  float *host_value = nullptr, *value = nullptr, *host_label = nullptr, *label = nullptr;
  // Capacities: pinned row_ptr, index, value, label, then the device ones, then field (both).
  std::size_t cap[8] = {}, host_field_cap = 0, field_cap = 0;
  cudaEvent_t copied = nullptr;  // recorded after the slot's copies
};

}  // namespace

struct CudaStep::State {
  kernels::WideShape shape;
  bool flow = true, overlap = true;
  kernels::WideFlowOptions flow_options;
  kernels::WideUpdateRule rule;
  float *params = nullptr, *grad = nullptr, *n = nullptr, *z = nullptr, *logits = nullptr, *host_logits = nullptr;
  std::size_t logits_cap = 0, host_logits_cap = 0;
  kernels::WideTouchedRows touched;  // the rows this step touched, listed on the device
  // Several ranks: the exchange's dense host gradient and flags (zero outside the rows of the
  // step in flight), and the pinned buffers the touched rows cross PCIe in, packed, both ways.
  std::vector<float> host_grad;
  std::vector<std::uint8_t> host_touched;
  unsigned long long* host_count = nullptr;
  std::int64_t* host_list = nullptr;
  float *host_packed = nullptr, *host_bias = nullptr, *packed = nullptr;
  std::size_t host_list_cap = 0, host_packed_cap = 0, packed_cap = 0;
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
    grow_pinned(s.host_row_ptr, s.cap[0], rows + 1);
    grow_pinned(s.host_index, s.cap[1], nnz);
    grow_pinned(s.host_value, s.cap[2], nnz);
    grow_pinned(s.host_label, s.cap[3], rows);
    grow_device(s.row_ptr, s.cap[4], rows + 1);
    grow_device(s.index, s.cap[5], nnz);
    grow_device(s.value, s.cap[6], nnz);
    grow_device(s.label, s.cap[7], rows);
    if (ffm) {
      grow_pinned(s.host_field, s.host_field_cap, nnz);
      grow_device(s.field, s.field_cap, nnz);
    }
    for (std::size_t i = 0; i <= rows; ++i) s.host_row_ptr[i] = data.row_ptr[std::size_t(begin) + i] - base;
    std::memcpy(s.host_index, data.index.data() + base, nnz * sizeof(std::uint32_t));
    std::memcpy(s.host_value, data.value.data() + base, nnz * sizeof(float));
    std::memcpy(s.host_label, data.label.data() + begin, rows * sizeof(float));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(s.row_ptr, s.host_row_ptr, (rows + 1) * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(s.index, s.host_index, nnz * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(s.value, s.host_value, nnz * sizeof(float), cudaMemcpyHostToDevice, stream));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(s.label, s.host_label, rows * sizeof(float), cudaMemcpyHostToDevice, stream));
    if (ffm) {
      std::memcpy(s.host_field, data.field.data() + base, nnz * sizeof(std::uint16_t));
      SKEW_CUDA_CHECK(
          cudaMemcpyAsync(s.field, s.host_field, nnz * sizeof(std::uint16_t), cudaMemcpyHostToDevice, stream));
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
    b.row_ptr = s.row_ptr;
    b.index = s.index;
    b.field = s.field;
    b.value = s.value;
    b.label = s.label;
    return b;
  }

  // Gradient of the batch in `slot` into grad, logits into the device buffer; timed by events.
  // The compute stream must already wait for the slot's `copied` event.
  void launch_gradient(const Slot& s) {
    const kernels::WideBatch b = device_batch(s);
    grow_device(logits, logits_cap, std::size_t(std::max<std::int64_t>(1, b.rows)));
    SKEW_CUDA_CHECK(cudaEventRecord(kernel_start, compute));
    if (flow)
      kernels::wide_flow_gradient_cuda(shape, flow_options, b, 0, s.nnz, params, grad, logits, compute);
    else
      kernels::wide_classical_gradient_cuda(shape, b, params, grad, logits, compute);
    SKEW_CUDA_CHECK(cudaEventRecord(kernel_stop, compute));
  }

  void logits_to_host(std::int64_t rows, std::vector<float>& out) {
    grow_pinned(host_logits, host_logits_cap, std::size_t(std::max<std::int64_t>(1, rows)));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(host_logits, logits, std::size_t(rows) * sizeof(float), cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaStreamSynchronize(compute));
    out.assign(host_logits, host_logits + rows);
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
    const std::int64_t listed = std::int64_t(*host_count);
    const std::size_t packed_len = std::size_t(listed) * std::size_t(row_len);
    grow_device(packed, packed_cap, std::max<std::size_t>(1, packed_len));
    grow_pinned(host_packed, host_packed_cap, std::max<std::size_t>(1, packed_len));
    grow_pinned(host_list, host_list_cap, std::size_t(std::max<std::int64_t>(1, listed)));
    kernels::wide_pack_rows_cuda(shape, touched, listed, grad, packed, compute);
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_packed, packed, packed_len * sizeof(float), cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_list, touched.list, std::size_t(listed) * sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(host_bias, grad, sizeof(float), cudaMemcpyDeviceToHost, compute));
    SKEW_CUDA_CHECK(cudaStreamSynchronize(compute));
    host_grad.resize(shape.num_params(), 0.0f);
    host_touched.resize(std::size_t(shape.num_features), 0);
    host_grad[0] = *host_bias;
    for (std::int64_t t = 0; t < listed; ++t) {
      host_touched[std::size_t(host_list[t])] = 1;
      std::copy_n(host_packed + t * row_len, row_len, host_grad.begin() + 1 + host_list[t] * row_len);
    }
    const std::int64_t samples = exchange(host_grad, host_touched, logits);
    // The group's rows, packed; the host arrays are left zero for the next step.
    std::int64_t group_rows = 0;
    for (std::size_t f = 0; f < host_touched.size(); ++f) group_rows += host_touched[f];
    grow_pinned(host_list, host_list_cap, std::size_t(std::max<std::int64_t>(1, group_rows)));
    grow_pinned(host_packed, host_packed_cap, std::max<std::size_t>(1, std::size_t(group_rows) * row_len));
    grow_device(packed, packed_cap, std::max<std::size_t>(1, std::size_t(group_rows) * row_len));
    std::int64_t t = 0;
    for (std::size_t f = 0; f < host_touched.size(); ++f) {
      if (!host_touched[f]) continue;
      host_touched[f] = 0;
      host_list[t] = std::int64_t(f);
      float* row = host_grad.data() + 1 + std::int64_t(f) * row_len;
      std::copy_n(row, row_len, host_packed + t * row_len);
      std::fill_n(row, row_len, 0.0f);
      ++t;
    }
    *host_bias = host_grad[0];
    host_grad[0] = 0.0f;
    *host_count = static_cast<unsigned long long>(group_rows);
    SKEW_CUDA_CHECK(cudaMemcpyAsync(touched.list, host_list, std::size_t(group_rows) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, compute));
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(touched.count, host_count, sizeof(unsigned long long), cudaMemcpyHostToDevice, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(packed, host_packed, std::size_t(group_rows) * row_len * sizeof(float),
                                    cudaMemcpyHostToDevice, compute));
    SKEW_CUDA_CHECK(cudaMemcpyAsync(grad, host_bias, sizeof(float), cudaMemcpyHostToDevice, compute));
    kernels::wide_unpack_rows_cuda(shape, touched.list, group_rows, packed, grad, compute);
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
  s.params = kernels::cuda::upload(params);
  s.grad = device_alloc<float>(params.size());
  SKEW_CUDA_CHECK(cudaMemset(s.grad, 0, std::max<std::size_t>(1, params.size()) * sizeof(float)));
  if (!n_state.empty()) s.n = kernels::cuda::upload(n_state);
  if (!z_state.empty()) s.z = kernels::cuda::upload(z_state);
  const std::size_t bit_words = std::size_t(shape.num_features / 32 + 1);
  s.touched.bits = device_alloc<std::uint32_t>(bit_words);
  SKEW_CUDA_CHECK(cudaMemset(s.touched.bits, 0, bit_words * sizeof(std::uint32_t)));
  s.touched.list = device_alloc<std::int64_t>(std::size_t(shape.num_features));
  s.touched.count = device_alloc<unsigned long long>(1);
  SKEW_CUDA_CHECK(cudaMemset(s.touched.count, 0, sizeof(unsigned long long)));
  SKEW_CUDA_CHECK(cudaMallocHost(&s.host_count, sizeof(unsigned long long)));
  SKEW_CUDA_CHECK(cudaMallocHost(&s.host_bias, sizeof(float)));
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
  for (Slot& slot : s.slots) {
    for (void* p : {static_cast<void*>(slot.host_row_ptr), static_cast<void*>(slot.host_index),
                    static_cast<void*>(slot.host_field), static_cast<void*>(slot.host_value),
                    static_cast<void*>(slot.host_label)})
      if (p) cudaFreeHost(p);
    for (void* p : {static_cast<void*>(slot.row_ptr), static_cast<void*>(slot.index), static_cast<void*>(slot.field),
                    static_cast<void*>(slot.value), static_cast<void*>(slot.label)})
      if (p) cudaFree(p);
    cudaEventDestroy(slot.copied);
  }
  for (void* p : {static_cast<void*>(s.host_logits), static_cast<void*>(s.host_count), static_cast<void*>(s.host_list),
                  static_cast<void*>(s.host_packed), static_cast<void*>(s.host_bias)})
    if (p) cudaFreeHost(p);
  for (void* p :
       {static_cast<void*>(s.params), static_cast<void*>(s.grad), static_cast<void*>(s.n), static_cast<void*>(s.z),
        static_cast<void*>(s.logits), static_cast<void*>(s.touched.bits), static_cast<void*>(s.touched.list),
        static_cast<void*>(s.touched.count), static_cast<void*>(s.packed)})
    if (p) cudaFree(p);
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
    SKEW_CUDA_CHECK(
        cudaMemcpyAsync(s.host_count, s.touched.count, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s.compute));
    s.logits_to_host(rows, logits);  // synchronises: host_count is ready too
    samples = s.exchange_rows(exchange, logits, rows_listed);
  }
  if (samples > 0)
    kernels::wide_update_cuda(s.shape, s.rule, 1.0f / float(samples), s.touched, rows_listed, s.params, s.grad, s.n,
                              s.z, s.compute);
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
  SKEW_CUDA_CHECK(cudaMemcpyAsync(grad.data(), s.grad, grad.size() * sizeof(float), cudaMemcpyDeviceToHost, s.compute));
  SKEW_CUDA_CHECK(cudaMemsetAsync(s.grad, 0, grad.size() * sizeof(float), s.compute));  // steps expect a zero gradient
  SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));
}

// Both on the compute stream (non-blocking: it does not order itself after the legacy default
// stream), finished before returning.
void CudaStep::upload(std::span<const float> params) {
  State& s = *state_;
  SKEW_CUDA_CHECK(
      cudaMemcpyAsync(s.params, params.data(), params.size() * sizeof(float), cudaMemcpyHostToDevice, s.compute));
  SKEW_CUDA_CHECK(cudaStreamSynchronize(s.compute));
}

void CudaStep::download(std::span<float> params) {
  State& s = *state_;
  SKEW_CUDA_CHECK(
      cudaMemcpyAsync(params.data(), s.params, params.size() * sizeof(float), cudaMemcpyDeviceToHost, s.compute));
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
