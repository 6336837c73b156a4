#include "kernels/moe_route.hpp"

#include <type_traits>

#include "core/error.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/moe_lane_sum.hpp"

namespace skew::kernels::moe {

void choice_keys(Device device, std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept,
                 std::int32_t* key) {
  SKEW_ON_CUDA(device, "moe choice keys", cuda::choice_keys(n, experts, expert, kept, key));
  for (std::int64_t a = 0; a < n; ++a) choice_key_element(a, experts, expert, kept, key);
}

void dispatch_keys(Device device, std::int64_t n, int experts, int replicas, const std::int32_t* expert,
                   const std::uint8_t* kept, const std::int64_t* order, const std::int64_t* replica_end,
                   const std::int32_t* replica_rank, int blocks, std::int32_t* key) {
  SKEW_ON_CUDA(device, "moe dispatch keys",
               cuda::dispatch_keys(n, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key));
  for (std::int64_t a = 0; a < n; ++a)
    dispatch_key_element(a, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key);
}

void local_positions(Device device, std::int64_t n, int blocks, const std::int64_t* block_begin,
                     const std::int64_t* block_target, std::int64_t* pos) {
  SKEW_ON_CUDA(device, "moe received-row positions", cuda::local_positions(n, blocks, block_begin, block_target, pos));
  for (std::int64_t i = 0; i < n; ++i) local_position_element(i, blocks, block_begin, block_target, pos);
}

template <class T>
void dispatch_rows(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                   const T* x, T* send) {
  SKEW_ON_CUDA_FLOAT(T, device, "moe dispatch", cuda::dispatch_rows(n, k, width, pos, rows, x, send));
  for (std::int64_t i = 0; i < n * width; ++i) dispatch_row_element(i, k, width, pos, rows, x, send);
}

template <class T>
void gather_rows(Device device, std::int64_t n, int width, const std::int64_t* pos, const T* in, T* out) {
  SKEW_ON_CUDA_FLOAT(T, device, "moe gather", cuda::gather_rows(n, width, pos, in, out));
  for (std::int64_t i = 0; i < n * width; ++i) gather_row_element(i, width, pos, in, out);
}

template <class T>
void combine(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
             const T* weight, const T* back, T* y) {
  SKEW_ON_CUDA_FLOAT(T, device, "moe combine", cuda::combine(tokens, k, width, pos, rows, weight, back, y));
  for (std::int64_t i = 0; i < tokens * width; ++i) combine_element(i, k, width, pos, rows, weight, back, y);
}

template <class T>
void combine_backward(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                      const T* weight, const T* dy, const T* back, T* dsend, T* dweight) {
  SKEW_ON_CUDA_FLOAT(T, device, "moe combine backward",
                     cuda::combine_backward(n, k, width, pos, rows, weight, dy, back, dsend, dweight));
  for (std::int64_t i = 0; i < n * width; ++i) combine_backward_element(i, k, width, pos, rows, weight, dy, dsend);
  for (std::int64_t a = 0; a < n; ++a)
    dweight[a] = static_cast<T>(lane_sum_host(
        [&](int lane) { return combine_dweight_partial(a, lane, kSumLanes, k, width, pos, rows, dy, back); }));
}

template <class T>
void add_rows(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
              const T* dback, T* dx) {
  SKEW_ON_CUDA_FLOAT(T, device, "moe row add", cuda::add_rows(tokens, k, width, pos, rows, dback, dx));
  for (std::int64_t i = 0; i < tokens * width; ++i) add_rows_element(i, k, width, pos, rows, dback, dx);
}

#define SKEW_ROUTE_KERNELS(T)                                                                                          \
  template void dispatch_rows<T>(Device, std::int64_t, int, int, const std::int64_t*, std::int64_t, const T*, T*);     \
  template void gather_rows<T>(Device, std::int64_t, int, const std::int64_t*, const T*, T*);                          \
  template void combine<T>(Device, std::int64_t, int, int, const std::int64_t*, std::int64_t, const T*, const T*, T*); \
  template void combine_backward<T>(Device, std::int64_t, int, int, const std::int64_t*, std::int64_t, const T*,       \
                                    const T*, const T*, T*, T*);                                                       \
  template void add_rows<T>(Device, std::int64_t, int, int, const std::int64_t*, std::int64_t, const T*, T*);
SKEW_ROUTE_KERNELS(float)
SKEW_ROUTE_KERNELS(double)

}  // namespace skew::kernels::moe
