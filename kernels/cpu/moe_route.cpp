#include "kernels/moe_route.hpp"

#include <type_traits>

#include "core/error.hpp"
#include "kernels/moe_float64_host.hpp"
#include "kernels/moe_lane_sum.hpp"

namespace skew::kernels::moe {

void choice_keys(Device device, std::int64_t n, int experts, const std::int32_t* expert, const std::uint8_t* kept,
                 std::int32_t* key) {
  if (device == Device::Cuda) return cuda::choice_keys(n, experts, expert, kept, key);
  for (std::int64_t a = 0; a < n; ++a) choice_key_element(a, experts, expert, kept, key);
}

void dispatch_keys(Device device, std::int64_t n, int experts, int replicas, const std::int32_t* expert,
                   const std::uint8_t* kept, const std::int64_t* order, const std::int64_t* replica_end,
                   const std::int32_t* replica_rank, int blocks, std::int32_t* key) {
  if (device == Device::Cuda)
    return cuda::dispatch_keys(n, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key);
  for (std::int64_t a = 0; a < n; ++a)
    dispatch_key_element(a, experts, replicas, expert, kept, order, replica_end, replica_rank, blocks, key);
}

void local_positions(Device device, std::int64_t n, int blocks, const std::int64_t* block_begin,
                     const std::int64_t* block_target, std::int64_t* pos) {
  if (device == Device::Cuda) return cuda::local_positions(n, blocks, block_begin, block_target, pos);
  for (std::int64_t i = 0; i < n; ++i) local_position_element(i, blocks, block_begin, block_target, pos);
}

template <class T>
void dispatch_rows(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                   const T* x, T* send) {
  if (runs_on_cuda<T>(device, "moe dispatch")) {
    if constexpr (std::is_same_v<T, float>) cuda::dispatch_rows(n, k, width, pos, rows, x, send);
    return;
  }
  for (std::int64_t i = 0; i < n * width; ++i) dispatch_row_element(i, k, width, pos, rows, x, send);
}

template <class T>
void gather_rows(Device device, std::int64_t n, int width, const std::int64_t* pos, const T* in, T* out) {
  if (runs_on_cuda<T>(device, "moe gather")) {
    if constexpr (std::is_same_v<T, float>) cuda::gather_rows(n, width, pos, in, out);
    return;
  }
  for (std::int64_t i = 0; i < n * width; ++i) gather_row_element(i, width, pos, in, out);
}

template <class T>
void combine(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
             const T* weight, const T* back, T* y) {
  if (runs_on_cuda<T>(device, "moe combine")) {
    if constexpr (std::is_same_v<T, float>) cuda::combine(tokens, k, width, pos, rows, weight, back, y);
    return;
  }
  for (std::int64_t i = 0; i < tokens * width; ++i) combine_element(i, k, width, pos, rows, weight, back, y);
}

template <class T>
void combine_backward(Device device, std::int64_t n, int k, int width, const std::int64_t* pos, std::int64_t rows,
                      const T* weight, const T* dy, const T* back, T* dsend, T* dweight) {
  if (runs_on_cuda<T>(device, "moe combine backward")) {
    if constexpr (std::is_same_v<T, float>)
      cuda::combine_backward(n, k, width, pos, rows, weight, dy, back, dsend, dweight);
    return;
  }
  for (std::int64_t i = 0; i < n * width; ++i) combine_backward_element(i, k, width, pos, rows, weight, dy, dsend);
  for (std::int64_t a = 0; a < n; ++a)
    dweight[a] = static_cast<T>(lane_sum_host(
        [&](int lane) { return combine_dweight_partial(a, lane, kSumLanes, k, width, pos, rows, dy, back); }));
}

template <class T>
void add_rows(Device device, std::int64_t tokens, int k, int width, const std::int64_t* pos, std::int64_t rows,
              const T* dback, T* dx) {
  if (runs_on_cuda<T>(device, "moe row add")) {
    if constexpr (std::is_same_v<T, float>) cuda::add_rows(tokens, k, width, pos, rows, dback, dx);
    return;
  }
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

#ifndef SKEW_WITH_CUDA
namespace cuda {
void local_positions(std::int64_t, int, const std::int64_t*, const std::int64_t*, std::int64_t*) {
  SKEW_THROW("moe received-row positions on CUDA in a build without CUDA");
}
void choice_keys(std::int64_t, int, const std::int32_t*, const std::uint8_t*, std::int32_t*) {
  SKEW_THROW("moe choice keys on CUDA in a build without CUDA");
}
void dispatch_keys(std::int64_t, int, int, const std::int32_t*, const std::uint8_t*, const std::int64_t*,
                   const std::int64_t*, const std::int32_t*, int, std::int32_t*) {
  SKEW_THROW("moe dispatch keys on CUDA in a build without CUDA");
}
void dispatch_rows(std::int64_t, int, int, const std::int64_t*, std::int64_t, const float*, float*) {
  SKEW_THROW("moe dispatch on CUDA in a build without CUDA");
}
void gather_rows(std::int64_t, int, const std::int64_t*, const float*, float*) {
  SKEW_THROW("moe gather on CUDA in a build without CUDA");
}
void combine(std::int64_t, int, int, const std::int64_t*, std::int64_t, const float*, const float*, float*) {
  SKEW_THROW("moe combine on CUDA in a build without CUDA");
}
void combine_backward(std::int64_t, int, int, const std::int64_t*, std::int64_t, const float*, const float*,
                      const float*, float*, float*) {
  SKEW_THROW("moe combine backward on CUDA in a build without CUDA");
}
void add_rows(std::int64_t, int, int, const std::int64_t*, std::int64_t, const float*, float*) {
  SKEW_THROW("moe row add on CUDA in a build without CUDA");
}
}  // namespace cuda
#endif

}  // namespace skew::kernels::moe
