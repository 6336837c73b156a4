// CUDA side of a wide training step after the gradient: list the rows the batch touched (a bit
// per feature says whether it is listed already, a warp reserves list slots with one atomic),
// then update the bias and exactly the listed rows with the rule of kernels/wide_update.hpp (the
// CPU optimiser updates the same rows from its touched list, so both apply the same lazy L2).
// Work and traffic are O(rows touched), never O(model). For several ranks, the listed rows are
// packed into one buffer for the host and the group's rows unpacked back.
#include <algorithm>

#include "core/cuda_check.hpp"
#include "kernels/wide_update.hpp"

namespace skew::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

__global__ void mark_touched_kernel(const std::uint32_t* index, std::int64_t nnz, WideTouchedRows rows) {
  const std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool fresh = false;  // e's feature was not listed yet (and e is the entry that lists it)
  std::int64_t f = 0;
  if (e < nnz) {
    f = index[e];
    const std::uint32_t mask = 1u << (f % 32);
    fresh = !(atomicOr(rows.bits + f / 32, mask) & mask);
  }
  const unsigned ballot = __ballot_sync(0xffffffffu, fresh);
  if (ballot == 0) return;
  const int lane = threadIdx.x % kWarp, leader = __ffs(ballot) - 1;
  unsigned long long first = 0;
  if (lane == leader) first = atomicAdd(rows.count, static_cast<unsigned long long>(__popc(ballot)));
  first = __shfl_sync(0xffffffffu, first, leader);
  if (fresh) rows.list[first + __popc(ballot & ((1u << lane) - 1u))] = f;
}

// One thread per listed row; thread 0 also updates the bias, which every step touches.
__global__ void update_kernel(WideUpdateRule rule, int row_len, float scale, WideTouchedRows rows, float* params,
                              float* grad, float* n, float* z) {
  const std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t == 0) {
    wide_update_coordinate(rule, params[0], grad[0] * scale, n, z);
    grad[0] = 0.0f;
  }
  if (t >= std::int64_t(*rows.count)) return;
  const std::int64_t f = rows.list[t];
  atomicAnd(rows.bits + f / 32, ~(1u << (f % 32)));  // listed afresh next step
  for (int j = 0; j < row_len; ++j) {
    const std::int64_t at = 1 + f * row_len + j;
    wide_update_coordinate(rule, params[at], grad[at] * scale, n ? n + at : nullptr, z ? z + at : nullptr);
    grad[at] = 0.0f;
  }
}

// Moves the listed rows out: packed[t * row_len + j] = grad row list[t], the row zeroed and its
// bit cleared, t < count; the group's rows (unpack) replace them.
__global__ void pack_rows_kernel(WideTouchedRows rows, int row_len, float* grad, float* packed) {
  const std::int64_t at = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= std::int64_t(*rows.count) * row_len) return;
  const std::int64_t f = rows.list[at / row_len];
  float& g = grad[1 + f * row_len + at % row_len];
  packed[at] = g;
  g = 0.0f;
  if (at % row_len == 0) atomicAnd(rows.bits + f / 32, ~(1u << (f % 32)));
}

// The reverse for `count` rows: grad row list[t] = packed[t].
__global__ void unpack_rows_kernel(const std::int64_t* list, std::int64_t count, int row_len, const float* packed,
                                   float* grad) {
  const std::int64_t at = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= count * row_len) return;
  grad[1 + list[at / row_len] * row_len + at % row_len] = packed[at];
}

unsigned blocks_for(std::int64_t items) {
  return unsigned((std::max<std::int64_t>(1, items) + kThreads - 1) / kThreads);
}

}  // namespace

void wide_mark_touched_cuda(const WideBatch& batch, std::int64_t base, std::int64_t nnz, const WideTouchedRows& rows,
                            void* stream) {
  if (nnz == 0) return;
  mark_touched_kernel<<<blocks_for(nnz), kThreads, 0, cudaStream_t(stream)>>>(batch.index + base, nnz, rows);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void wide_update_cuda(const WideShape& shape, const WideUpdateRule& rule, float scale, const WideTouchedRows& rows,
                      std::int64_t max_rows, float* params, float* grad, float* n, float* z, void* stream) {
  update_kernel<<<blocks_for(max_rows), kThreads, 0, cudaStream_t(stream)>>>(rule, shape.row_len(), scale, rows, params,
                                                                             grad, n, z);
  SKEW_CUDA_CHECK(cudaGetLastError());
  SKEW_CUDA_CHECK(cudaMemsetAsync(rows.count, 0, sizeof(unsigned long long), cudaStream_t(stream)));
}

void wide_pack_rows_cuda(const WideShape& shape, const WideTouchedRows& rows, std::int64_t max_rows, float* grad,
                         float* packed, void* stream) {
  pack_rows_kernel<<<blocks_for(max_rows * shape.row_len()), kThreads, 0, cudaStream_t(stream)>>>(rows, shape.row_len(),
                                                                                                  grad, packed);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

void wide_unpack_rows_cuda(const WideShape& shape, const std::int64_t* list, std::int64_t count, const float* packed,
                           float* grad, void* stream) {
  if (count == 0) return;
  unpack_rows_kernel<<<blocks_for(count * shape.row_len()), kThreads, 0, cudaStream_t(stream)>>>(
      list, count, shape.row_len(), packed, grad);
  SKEW_CUDA_CHECK(cudaGetLastError());
}

}  // namespace skew::kernels
