// CUDA twins of kernels/moe_route.hpp: the same SKEW_HD bodies, one element (or assignment) per
// thread over a grid-stride loop; no launch for an empty range.
#include "kernels/cuda/moe_launch.cuh"
#include "kernels/moe_lane_sum.hpp"
#include "kernels/moe_route.hpp"

namespace skew::kernels::moe::cuda {
namespace {

__global__ void local_positions_kernel(std::int64_t n, int blocks, const std::int64_t* block_begin,
                                       const std::int64_t* block_target, std::int64_t* pos) {
  SKEW_FOR_EACH_INDEX(i, n) local_position_element(i, blocks, block_begin, block_target, pos);
}

__global__ void choice_keys_kernel(std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept,
                                   std::int32_t* key) {
  SKEW_FOR_EACH_INDEX(a, n) choice_key_element(a, experts, expert, kept, key);
}

__global__ void dispatch_keys_kernel(std::int64_t n, int experts, int replicas, const std::int32_t* expert,
                                     const std::uint8_t* kept, const std::int64_t* order,
                                     const std::int64_t* replica_end, const std::int32_t* replica_rank, int blocks,
                                     std::int32_t* key) {
  SKEW_FOR_EACH_INDEX(a, n)
  dispatch_key_element(a, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key);
}

__global__ void dispatch_rows_kernel(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                     const float* x, float* send) {
  SKEW_FOR_EACH_INDEX(i, n) dispatch_row_element(i, k, width, pos, rows, x, send);
}

__global__ void gather_rows_kernel(std::int64_t n, int width, const std::int64_t* pos, const float* in, float* out) {
  SKEW_FOR_EACH_INDEX(i, n) gather_row_element(i, width, pos, in, out);
}

__global__ void combine_kernel(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                               const float* weight, const float* back, float* y) {
  SKEW_FOR_EACH_INDEX(i, n) combine_element(i, k, width, pos, rows, weight, back, y);
}

__global__ void combine_backward_kernel(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                        const float* weight, const float* dy, float* dsend) {
  SKEW_FOR_EACH_INDEX(i, n) combine_backward_element(i, k, width, pos, rows, weight, dy, dsend);
}

// One block of kSumLanes threads per assignment (grid-stride over assignments), the lane sum's
// tree in shared memory.
__global__ void combine_dweight_kernel(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                       const float* dy, const float* back, float* dweight) {
  __shared__ double partial[kSumLanes];
  const int lane = static_cast<int>(threadIdx.x);
  for (std::int64_t a = blockIdx.x; a < n; a += gridDim.x) {
    partial[lane] = combine_dweight_partial(a, lane, kSumLanes, k, width, pos, rows, dy, back);
    for (int half = kSumLanes / 2; half > 0; half /= 2) {
      __syncthreads();
      lane_tree_level(partial, lane, half);
    }
    if (lane == 0) dweight[a] = static_cast<float>(partial[0]);
    __syncthreads();  // partial[] is rewritten by the next assignment
  }
}

__global__ void add_rows_kernel(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                                const float* dback, float* dx) {
  SKEW_FOR_EACH_INDEX(i, n) add_rows_element(i, k, width, pos, rows, dback, dx);
}

// Launches `kernel` over n indices (none when n is 0) and checks the launch.
}  // namespace

void local_positions(std::int64_t n, int blocks, const std::int64_t* block_begin, const std::int64_t* block_target,
                     std::int64_t* pos) {
  launch_over(local_positions_kernel, n, blocks, block_begin, block_target, pos);
}
void choice_keys(std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept, std::int32_t* key) {
  launch_over(choice_keys_kernel, n, experts, expert, kept, key);
}
void dispatch_keys(std::int64_t n, int experts, int replicas, const std::int32_t* expert, const std::uint8_t* kept,
                   const std::int64_t* order, const std::int64_t* replica_end, const std::int32_t* replica_rank,
                   int blocks, std::int32_t* key) {
  launch_over(dispatch_keys_kernel, n, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key);
}
void dispatch_rows(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* x,
                   float* send) {
  launch_over(dispatch_rows_kernel, n * width, k, width, pos, rows, x, send);
}
void gather_rows(std::int64_t n, int width, const std::int64_t* pos, const float* in, float* out) {
  launch_over(gather_rows_kernel, n * width, width, pos, in, out);
}
void combine(std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* weight,
             const float* back, float* y) {
  launch_over(combine_kernel, tokens * width, k, width, pos, rows, weight, back, y);
}
void combine_backward(std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* weight,
                      const float* dy, const float* back, float* dsend, float* dweight) {
  launch_over(combine_backward_kernel, n * width, k, width, pos, rows, weight, dy, dsend);
  if (n == 0) return;
  combine_dweight_kernel<<<static_cast<int>(std::min<std::int64_t>(n, std::int64_t(1) << 16)), kSumLanes>>>(
      n, k, width, pos, rows, dy, back, dweight);
  SKEW_CUDA_CHECK(cudaGetLastError());
}
void add_rows(std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows, const float* dback,
              float* dx) {
  launch_over(add_rows_kernel, tokens * width, k, width, pos, rows, dback, dx);
}

}  // namespace skew::kernels::moe::cuda
