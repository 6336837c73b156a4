// NcclProcessGroup on device buffers, under mpirun: every rank needs its own GPU, so a case
// skips (all ranks alike) when the node has fewer GPUs than ranks.
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "mpi/nccl_process_group.hpp"
#include "tests/cuda/node_place.hpp"

using skew::Device;
using skew::DType;
using skew::Tensor;
using skew::comm::ReduceOp;

namespace {

// Binds local rank -> GPU and makes the world NCCL group; nullptr (after printing SKIPPED)
// when there are not enough GPUs.
std::shared_ptr<skew::comm::ProcessGroup> nccl_world() {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const auto [local_rank, local_size] = skew::test::node_place();
  const int devices = skew::cuda_device_count();
  if (devices < local_size) {
    std::printf("SKIPPED: %d ranks on this node but %d CUDA devices; NCCL needs one GPU per rank\n", local_size,
                devices);
    return nullptr;
  }
  if (cudaSetDevice(local_rank) != cudaSuccess) SKEW_THROW("cudaSetDevice(" << local_rank << ") failed");
  return skew::comm::make_nccl_group(MPI_COMM_WORLD);
}

template <typename T>
Tensor device_tensor(const std::vector<T>& v) {
  return Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(Device::Cuda);
}

template <typename T>
std::vector<T> host_values(const Tensor& t) {
  const Tensor h = t.to(Device::Host);
  return std::vector<T>(h.data<T>(), h.data<T>() + h.numel());
}

}  // namespace

TEST_CASE("nccl group: allreduce sum/avg/max/min on device buffers", "[cuda][nccl]") {
  auto g = nccl_world();
  if (!g) return;
  const int n = g->size(), r = g->rank();
  CHECK(g->backend() == "nccl");
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<float> x(1025);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((r + 1) * static_cast<int>(i % 97)) + 0.5f;
    Tensor t = device_tensor(x);
    g->allreduce(skew::comm::view(t), op);
    const auto got = host_values<float>(t);
    INFO("op " << skew::comm::reduce_op_name(op));
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double v = static_cast<double>(i % 97);
      double want = v * n * (n + 1) / 2.0 + 0.5 * n;
      if (op == ReduceOp::Avg) want /= n;
      if (op == ReduceOp::Max) want = v * n + 0.5;
      if (op == ReduceOp::Min) want = v + 0.5;
      CHECK(got[i] == Approx(want).epsilon(1e-6));
    }
  }
  std::vector<std::int64_t> ints{std::int64_t{1} << 40, -3};
  Tensor ti = device_tensor(ints);
  auto work = g->iallreduce(skew::comm::view(ti), ReduceOp::Sum);
  work->wait();
  CHECK(host_values<std::int64_t>(ti) == std::vector<std::int64_t>{n * (std::int64_t{1} << 40), -3LL * n});
  std::vector<float> host_buf(4);
  CHECK_THROWS_WITH(g->allreduce(skew::comm::view(host_buf), ReduceOp::Sum),
                    Catch::Contains("buffer is on host but this backend works on cuda"));
}

TEST_CASE("nccl group: alltoallv uneven with zero-length peers, allgatherv, broadcast", "[cuda][nccl]") {
  auto g = nccl_world();
  if (!g) return;
  const int n = g->size(), r = g->rank();
  const auto sends = [](int a, int b) { return static_cast<std::size_t>((a + 2 * b) % 3); };
  std::vector<std::size_t> sc, rc;
  std::vector<float> vs;
  for (int p = 0; p < n; ++p) {
    sc.push_back(sends(r, p));
    rc.push_back(sends(p, r));
    for (std::size_t j = 0; j < sends(r, p); ++j)
      vs.push_back(static_cast<float>(r * 1000 + p * 10 + static_cast<int>(j)));
  }
  // Buffers of at least one element so a rank that sends or receives nothing still has a pointer.
  Tensor ds = Tensor::zeros({static_cast<std::int64_t>(std::max<std::size_t>(vs.size(), 1))}, DType::F32, Device::Cuda);
  if (!vs.empty()) ds = device_tensor(vs);
  const std::size_t nr = skew::comm::sum_counts(rc);
  Tensor dr = Tensor::zeros({static_cast<std::int64_t>(std::max<std::size_t>(nr, 1))}, DType::F32, Device::Cuda);
  g->alltoallv(skew::comm::view(ds), sc, skew::comm::view(dr), rc);
  const auto got = host_values<float>(dr);
  std::size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < sends(p, r); ++j)
      CHECK(got[at++] == static_cast<float>(p * 1000 + r * 10 + static_cast<int>(j)));

  std::vector<std::size_t> counts;
  for (int p = 0; p < n; ++p) counts.push_back(static_cast<std::size_t>((2 * p + 1) % 3));
  std::vector<std::int32_t> mine(counts[static_cast<std::size_t>(r)]);
  for (std::size_t j = 0; j < mine.size(); ++j) mine[j] = r * 100 + static_cast<int>(j);
  Tensor dm =
      Tensor::zeros({static_cast<std::int64_t>(std::max<std::size_t>(mine.size(), 1))}, DType::I32, Device::Cuda);
  if (!mine.empty()) dm = device_tensor(mine);
  Tensor dall =
      Tensor::zeros({static_cast<std::int64_t>(skew::comm::sum_counts(counts) + 1)}, DType::I32, Device::Cuda);
  skew::comm::Buffer send_view = skew::comm::view(dm);
  send_view.count = mine.size();
  g->allgatherv(send_view, skew::comm::view(dall), counts);
  const auto all = host_values<std::int32_t>(dall);
  at = 0;
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < counts[static_cast<std::size_t>(p)]; ++j)
      CHECK(all[at++] == p * 100 + static_cast<int>(j));

  for (int root = 0; root < n; ++root) {
    Tensor b = device_tensor(std::vector<double>(3, r == root ? root + 0.5 : -1.0));
    g->broadcast(skew::comm::view(b), root);
    CHECK(host_values<double>(b) == std::vector<double>(3, root + 0.5));
  }
  g->barrier();
}

TEST_CASE("nccl group: split and subgroup reuse", "[cuda][nccl]") {
  auto g = nccl_world();
  if (!g) return;
  const int n = g->size(), r = g->rank();
  auto sub = g->split(0, -r);
  REQUIRE(sub != nullptr);
  CHECK(sub->rank() == n - 1 - r);
  Tensor t = device_tensor(std::vector<float>{static_cast<float>(r)});
  sub->allreduce(skew::comm::view(t), ReduceOp::Sum);
  CHECK(host_values<float>(t)[0] == static_cast<float>(n * (n - 1) / 2));
  auto self = g->subgroup({r});
  CHECK(g->subgroup({r}).get() == self.get());
  CHECK(g->subgroups_created() == 1);
  Tensor u = device_tensor(std::vector<float>{2.5f});
  self->allreduce(skew::comm::view(u), ReduceOp::Sum);
  CHECK(host_values<float>(u)[0] == 2.5f);
}

TEST_CASE("nccl group: an operation waits for the kernels the caller enqueued before it", "[cuda][nccl]") {
  auto g = nccl_world();
  if (!g) return;
  // The caller's stream is held back by a host function, then overwrites the send buffer with a
  // device-to-device copy. Both are only enqueued when alltoallv is called: an operation that did
  // not wait for the caller's stream would send the old values (1) instead of the new ones.
  const int n = g->size(), r = g->rank();
  const std::size_t per_peer = 1 << 16;
  Tensor send = device_tensor(std::vector<float>(per_peer * n, 1.f));
  const Tensor fresh = device_tensor(std::vector<float>(per_peer * n, 100.f + r));
  Tensor recv = device_tensor(std::vector<float>(per_peer * n, -1.f));
  auto hold = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
  REQUIRE(cudaLaunchHostFunc(cudaStreamLegacy, hold, nullptr) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(send.raw(), fresh.raw(), per_peer * n * sizeof(float), cudaMemcpyDeviceToDevice,
                          cudaStreamLegacy) == cudaSuccess);
  const std::vector<std::size_t> counts(static_cast<std::size_t>(n), per_peer);
  g->alltoallv(skew::comm::view(send), counts, skew::comm::view(recv), counts);
  const auto got = host_values<float>(recv);
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < per_peer; i += 4099) REQUIRE(got[p * per_peer + i] == 100.f + p);
}
