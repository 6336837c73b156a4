// Copies between host vectors and device tensors for the CUDA tests.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace skew::test {

template <class T>
Tensor on_gpu(const std::vector<T>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(Device::Cuda);
}

template <class T>
std::vector<T> on_host(const Tensor& t) {
  const Tensor h = t.to(Device::Host);
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

}  // namespace skew::test
