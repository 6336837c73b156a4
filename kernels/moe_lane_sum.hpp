// A deterministic parallel sum of one row's terms (a gate statistic's column over tokens, an
// assignment's dot product over columns): lane l of kSumLanes adds terms l, l + kSumLanes, ... in
// order into partial[l], then the partials are added pairwise in a fixed tree. A CUDA block of
// kSumLanes threads runs the lanes at once with partial[] in shared memory; the CPU twin runs them
// one after another and the same tree, so both give the same double bit for bit, run after run.
#pragma once
#include "core/host_device.hpp"

namespace skew::kernels::moe {

constexpr int kSumLanes = 128;

// One level of the tree: lanes below `half` add the partial `half` above them.
SKEW_HD inline void lane_tree_level(double* partial, int lane, int half) {
  if (lane < half) partial[lane] += partial[lane + half];
}

// The CPU twin's reduction: partial_of(lane) for every lane, then the tree; returns the sum.
template <class Partial>
double lane_sum_host(Partial partial_of) {
  double partial[kSumLanes];
  for (int lane = 0; lane < kSumLanes; ++lane) partial[lane] = partial_of(lane);
  for (int half = kSumLanes / 2; half > 0; half /= 2)
    for (int lane = 0; lane < half; ++lane) lane_tree_level(partial, lane, half);
  return partial[0];
}

}  // namespace skew::kernels::moe
