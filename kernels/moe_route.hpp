// Row movement of the MoE layer's data plane, with one per-element (or per-assignment) body for
// the host and the device (SKEW_HD). Assignment a = t * k + j is token t's j-th expert choice;
// pos[a] is its row in the send buffer (rows grouped by (rank, expert) block), and a row
// >= `rows` (the buffer's row count) marks an assignment the policy dropped.
//   choice_key       the expert of each kept assignment, `experts` for a dropped one
//   dispatch_key     its destination block (rank * experts + expert), `blocks` when dropped
//   dispatch_rows    send[pos[a]] = x[t]
//   gather_rows      out[i] = in[pos[i]]
//   combine          y[t] = sum_j weight[a] * back[pos[a]]
//   combine_backward dsend[pos[a]] = weight[a] * dy[t] (per element), dweight[a] = <dy[t], back[pos[a]]>
//                    (a fixed-order lane sum per assignment, moe_lane_sum.hpp)
//   add_rows         dx[t] += sum_j dback[pos[a]]
//   local_positions  each received row's row in the expert-contiguous compute buffers
// The float functions run on host or device; the double ones on the host (float64 references).
// The CPU twins loop over the same index space in index order, so each output element sums its
// terms in the order the CUDA thread does.
#pragma once
#include <cstdint>

#include "core/host_device.hpp"
#include "core/tensor.hpp"

namespace skew::kernels::moe {

SKEW_HD inline void choice_key_element(std::int64_t a, int experts, const std::int32_t* expert,
                                       const std::uint8_t* kept, std::int32_t* key) {
  key[a] = kept[a] ? expert[a] : experts;
}

// `order[a]`: a's rank among the kept assignments of its expert (in assignment order). Expert e's
// replicas are r = 0..replicas-1 with ranks replica_rank[e * replicas + r]; the first
// replica_end[e * replicas + r] of its assignments go to replicas 0..r.
SKEW_HD inline void dispatch_key_element(std::int64_t a, int experts, int replicas, const std::int32_t* expert,
                                         const std::uint8_t* kept, const std::int64_t* order,
                                         const std::int64_t* replica_end, const std::int32_t* replica_rank, int blocks,
                                         std::int32_t* key) {
  const int e = expert[a];
  if (!kept[a]) {
    key[a] = blocks;
    return;
  }
  int r = 0;
  while (order[a] >= replica_end[e * replicas + r]) ++r;
  key[a] = replica_rank[e * replicas + r] * experts + e;
}

template <class T>
SKEW_HD inline void dispatch_row_element(std::int64_t i, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                         const T* x, T* send) {
  const std::int64_t a = i / width, c = i % width;
  if (pos[a] < rows) send[pos[a] * width + c] = x[(a / k) * width + c];
}

template <class T>
SKEW_HD inline void gather_row_element(std::int64_t i, int width, const std::int64_t* pos, const T* in, T* out) {
  out[i] = in[pos[i / width] * width + i % width];
}

template <class T>
SKEW_HD inline void combine_element(std::int64_t i, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                    const T* weight, const T* back, T* y) {
  const std::int64_t t = i / width, c = i % width;
  T acc = T(0);
  for (int j = 0; j < k; ++j) {
    const std::int64_t a = t * k + j;
    if (pos[a] < rows) acc += weight[a] * back[pos[a] * width + c];
  }
  y[i] = acc;
}

// dsend[pos[a]] = weight[a] * dy[t], element i = a * width + c (nothing for a dropped a).
template <class T>
SKEW_HD inline void combine_backward_element(std::int64_t i, int k, int width, const std::int64_t* pos,
                                             std::int64_t rows, const T* weight, const T* dy, T* dsend) {
  const std::int64_t a = i / width, c = i % width;
  if (pos[a] < rows) dsend[pos[a] * width + c] = weight[a] * dy[(a / k) * width + c];
}

// Lane `lane`'s share of dweight[a] = <dy[t], back[pos[a]]> (moe_lane_sum.hpp: columns lane,
// lane + lanes, ... in order), in double as the float64 reference; 0 for a dropped assignment.
template <class T>
SKEW_HD inline double combine_dweight_partial(std::int64_t a, int lane, int lanes, int k, int width,
                                              const std::int64_t* pos, std::int64_t rows, const T* dy, const T* back) {
  if (pos[a] >= rows) return 0;
  const T* g = dy + (a / k) * width;
  const T* out = back + pos[a] * width;
  double dot = 0;
  for (int c = lane; c < width; c += lanes) dot += static_cast<double>(g[c] * out[c]);
  return dot;
}

template <class T>
SKEW_HD inline void add_rows_element(std::int64_t i, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                     const T* dback, T* dx) {
  const std::int64_t t = i / width, c = i % width;
  T acc = dx[i];
  for (int j = 0; j < k; ++j) {
    const std::int64_t a = t * k + j;
    if (pos[a] < rows) acc += dback[pos[a] * width + c];
  }
  dx[i] = acc;
}

// Received row i (rows in blocks b = source * experts + expert, source-major, block b starting at
// block_begin[b], block_begin[blocks] = all rows) to block_target[b] + its offset in the block:
// b is the last block with block_begin[b] <= i, which skips the empty blocks.
SKEW_HD inline void local_position_element(std::int64_t i, int blocks, const std::int64_t* block_begin,
                                           const std::int64_t* block_target, std::int64_t* pos) {
  int lo = 0, hi = blocks;  // block_begin[lo] <= i < block_begin[hi]
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (block_begin[mid] <= i)
      lo = mid;
    else
      hi = mid;
  }
  pos[i] = block_target[lo] + (i - block_begin[lo]);
}

// n = assignments (tokens * k) unless said otherwise; width = the row length. T = float on
// either device, double on the host only.
void choice_keys(Device device, std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept,
                 std::int32_t* key);
void dispatch_keys(Device device, std::int64_t n, int experts, int replicas, const std::int32_t* expert,
                   const std::uint8_t* kept, const std::int64_t* order, const std::int64_t* replica_end,
                   const std::int32_t* replica_rank, int blocks, std::int32_t* key);
// n = received rows.
void local_positions(Device device, std::int64_t n, int blocks, const std::int64_t* block_begin,
                     const std::int64_t* block_target, std::int64_t* pos);
template <class T>
void dispatch_rows(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                   const T* x, T* send);
// n = rows gathered.
template <class T>
void gather_rows(Device device, std::int64_t n, int width, const std::int64_t* pos, const T* in, T* out);
template <class T>
void combine(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
             const T* weight, const T* back, T* y);
template <class T>
void combine_backward(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                      const T* weight, const T* dy, const T* back, T* dsend, T* dweight);
template <class T>
void add_rows(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
              const T* dback, T* dx);

#if defined(SKEW_WITH_CUDA)
namespace cuda {
void local_positions(std::int64_t n, int blocks, const std::int64_t* block_begin, const std::int64_t* block_target,
                     std::int64_t* pos);
void choice_keys(std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept, std::int32_t* key);
void dispatch_keys(std::int64_t n, int experts, int replicas, const std::int32_t* expert, const std::uint8_t* kept,
                   const std::int64_t* order, const std::int64_t* replica_end, const std::int32_t* replica_rank,
                   int blocks, std::int32_t* key);
void dispatch_rows(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* x,
                   float* send);
void gather_rows(std::int64_t n, int width, const std::int64_t* pos, const float* in, float* out);
void combine(std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* weight,
             const float* back, float* y);
void combine_backward(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* weight,
                      const float* dy, const float* back, float* dsend, float* dweight);
void add_rows(std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* dback,
              float* dx);
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
