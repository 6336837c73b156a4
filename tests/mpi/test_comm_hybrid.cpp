// HybridProcessGroup's routing under mpirun, without a GPU: the host half is an MPI group that
// refuses device buffers, the device half an MPI group staging fake device buffers
// (fake_device.hpp), so a device buffer routed to the host half would throw and one routed to the
// device half shows up in the fake copy counters. Values against closed forms; splits and cached
// subgroups split both halves. (tests/cuda/test_cuda_comm.cpp runs the real MPI + NCCL pair.)
#include <mpi.h>

#include <catch2/catch.hpp>
#include <vector>

#include "mpi/hybrid_process_group.hpp"
#include "mpi/mpi_process_group.hpp"
#include "tests/mpi/fake_device.hpp"

using skew::comm::HybridProcessGroup;
using skew::comm::MpiProcessGroup;
using skew::comm::ReduceOp;
using skew::comm::fake::counters;
using skew::comm::fake::device_view;

namespace {

struct Halves {
  std::shared_ptr<MpiProcessGroup> host, device;
};

Halves halves() {
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  return {std::make_shared<MpiProcessGroup>(a, nullptr),
          std::make_shared<MpiProcessGroup>(b, &skew::comm::fake::copies)};
}

float value(int rank, std::size_t i) {
  return static_cast<float>(rank * 100) + 0.5f * static_cast<float>(i);
}

}  // namespace

TEST_CASE("hybrid group: host buffers to the host half, device buffers to the device half", "[mpi][hybrid]") {
  const Halves h = halves();
  HybridProcessGroup g(h.host, h.device);
  const int n = g.size(), r = g.rank();
  CHECK(g.backend() == "mpi+mpi");
  CHECK(g.world_ranks() == h.host->world_ranks());

  std::vector<float> on_host(9), on_device(9);
  for (std::size_t i = 0; i < 9; ++i) on_host[i] = on_device[i] = value(r, i);
  const std::size_t copied = counters.to_host_bytes;
  g.allreduce(skew::comm::view(on_host), ReduceOp::Sum);
  CHECK(counters.to_host_bytes == copied);  // a host buffer is not staged
  g.allreduce(device_view(on_device), ReduceOp::Sum);
  CHECK(counters.to_host_bytes == copied + 9 * sizeof(float));
  for (std::size_t i = 0; i < 9; ++i) {
    const float want = static_cast<float>(100 * n * (n - 1) / 2) + 0.5f * static_cast<float>(i) * static_cast<float>(n);
    CHECK(on_host[i] == Approx(want));
    CHECK(on_device[i] == Approx(want));
  }

  std::vector<float> send(static_cast<std::size_t>(n)), recv(send.size(), -1.f);
  for (int p = 0; p < n; ++p) send[static_cast<std::size_t>(p)] = value(r, static_cast<std::size_t>(p));
  const std::vector<std::size_t> ones(static_cast<std::size_t>(n), 1);
  g.ialltoallv(device_view(send), ones, device_view(recv), ones)->wait();
  for (int p = 0; p < n; ++p) CHECK(recv[static_cast<std::size_t>(p)] == value(p, static_cast<std::size_t>(r)));

  // Every rank refuses alike before anything is sent, so no rank is left waiting.
  CHECK_THROWS_WITH(g.alltoallv(skew::comm::view(send), ones, device_view(recv), ones),
                    Catch::Contains("alltoallv: send buffer on host, receive buffer on cuda"));
  CHECK_THROWS_WITH(g.allgather(device_view(send), skew::comm::view(recv)),
                    Catch::Contains("allgather: send buffer on cuda, receive buffer on host"));
}

TEST_CASE("hybrid group: one batch with host and device legs completes both", "[mpi][hybrid]") {
  const Halves h = halves();
  HybridProcessGroup g(h.host, h.device);
  const int n = g.size(), r = g.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> fwd(5), back(5), fwd_in(5, -1.f), back_in(5, -1.f);
  for (std::size_t i = 0; i < 5; ++i) fwd[i] = back[i] = value(r, i);
  auto work = g.batch_isend_irecv(
      {skew::comm::send_op(device_view(fwd), next, 3), skew::comm::recv_op(device_view(fwd_in), prev, 3),
       skew::comm::send_op(skew::comm::view(back), prev, 4), skew::comm::recv_op(skew::comm::view(back_in), next, 4)});
  work->wait();
  CHECK(work->test());
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(fwd_in[i] == value(prev, i));
    CHECK(back_in[i] == value(next, i));
  }
  // Self-exchange through the device half only (a rank that moves state to itself in a batch).
  std::vector<float> self_in(5, -1.f);
  g.batch_isend_irecv({skew::comm::send_op(device_view(fwd), r, 5), skew::comm::recv_op(device_view(self_in), r, 5)})
      ->wait();
  CHECK(self_in == fwd);
}

TEST_CASE("hybrid group: splits and cached subgroups split both halves", "[mpi][hybrid]") {
  const Halves h = halves();
  HybridProcessGroup g(h.host, h.device);
  const int n = g.size(), r = g.rank();

  auto reversed = g.split(0, -r);
  REQUIRE(reversed != nullptr);
  CHECK(reversed->rank() == n - 1 - r);
  CHECK(reversed->backend() == "mpi+mpi");
  std::vector<double> x{static_cast<double>(r) + 0.25};
  reversed->broadcast(device_view(x), 0);  // the old last rank is the new root
  CHECK(x[0] == n - 1 + 0.25);
  CHECK(g.split(-1, 0) == nullptr);

  std::vector<int> everyone;
  for (int p = n - 1; p >= 0; --p) everyone.push_back(p);
  auto sub = g.subgroup(everyone);
  CHECK(g.subgroup(everyone).get() == sub.get());
  CHECK(g.subgroups_created() == 1);
  CHECK(h.host->subgroups_created() == 1);
  CHECK(h.device->subgroups_created() == 1);
  std::vector<float> y{static_cast<float>(r + 1)}, z{static_cast<float>(r + 1)};
  sub->allreduce(device_view(y), ReduceOp::Max);
  sub->allreduce(skew::comm::view(z), ReduceOp::Min);
  CHECK(y[0] == static_cast<float>(n));
  CHECK(z[0] == 1.f);
  sub->barrier();
}

TEST_CASE("hybrid group: halves over different rank orders are refused", "[mpi][hybrid]") {
  const Halves h = halves();
  if (h.host->size() < 2) return;  // one rank has a single order
  auto reversed = h.device->split(0, -h.device->rank());
  CHECK_THROWS_WITH(HybridProcessGroup(h.host, reversed), Catch::Contains("halves span different ranks or orders"));
}
