// DeviceArray on the host: std::vector-like resize, zeros, overwrite-resize keeping the block,
// deep copies, moves, device changes, ranged copies and their bounds; CUDA arrays refused
// without a device. The device side and the caching allocator: tests/cuda/test_cuda_core.cpp.
#include <catch2/catch.hpp>
#include <vector>

#include "core/device_array.hpp"

using skew::Device;
using skew::DeviceArray;

TEST_CASE("a DeviceArray resizes as std::vector does and grows only", "[core][device_array]") {
  DeviceArray<float> a;
  CHECK(a.device() == Device::Host);
  CHECK(a.empty());
  a.resize(3);
  CHECK(a.host_copy() == std::vector<float>(3, 0.0f));
  a[0] = 1.0f, a[1] = 2.0f, a[2] = 3.0f;
  a.resize(5);  // the first three keep their values, the new ones are zero
  CHECK(a.host_copy() == std::vector<float>{1, 2, 3, 0, 0});
  const float* block = a.data();
  a.resize(2);
  a.resize(4);  // a shrink keeps the block; growing back within it zeroes the new values
  CHECK(a.data() == block);
  CHECK(a.host_copy() == std::vector<float>{1, 2, 0, 0});
  a.resize_for_overwrite(5);
  CHECK(a.data() == block);
  CHECK(a.size() == 5);
  a.zeros(3);
  CHECK(a.host_copy() == std::vector<float>(3, 0.0f));
  a.clear();
  CHECK(a.empty());
}

TEST_CASE("a DeviceArray copies deeply, moves its block and changes device emptied", "[core][device_array]") {
  DeviceArray<std::int64_t> a;
  a.assign_from(std::vector<std::int64_t>{4, 5, 6});
  DeviceArray<std::int64_t> copy = a;
  copy[0] = 7;
  CHECK(a[0] == 4);
  CHECK(copy == DeviceArray<std::int64_t>(copy));
  CHECK_FALSE(copy == a);
  const std::int64_t* block = a.data();
  DeviceArray<std::int64_t> moved = std::move(a);
  CHECK(moved.data() == block);
  CHECK(moved.host_copy() == std::vector<std::int64_t>{4, 5, 6});
  DeviceArray<std::int64_t> assigned;
  assigned.assign(moved);
  CHECK(assigned.host_copy() == moved.host_copy());
  std::vector<std::int64_t> part(2);
  moved.download(part.data(), 2, 1);
  CHECK(part == std::vector<std::int64_t>{5, 6});
  moved.upload(part.data(), 2, 0);
  CHECK(moved.host_copy() == std::vector<std::int64_t>{5, 6, 6});
  CHECK_THROWS_WITH(moved.upload(part.data(), 2, 2), Catch::Contains("copy of [2, 4) out of a buffer of 3"));
  moved.set_device(Device::Host);  // already there: the values stay
  CHECK(moved.size() == 3);
  if (skew::cuda_device_count() == 0) {
    moved.set_device(Device::Cuda);
    CHECK(moved.empty());
    CHECK_THROWS_WITH(moved.resize(1), Catch::Contains("CUDA"));
  }
}
