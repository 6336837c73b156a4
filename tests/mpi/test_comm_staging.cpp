// MpiProcessGroup on device buffers (fake_device.hpp: host memory labelled cuda, memcpy copies):
// every collective and point-to-point form against closed-form values; only what a call reads is
// copied in and only what it writes is copied back (a v-collective's unused tail stays as it
// was, a non-blocking call writes nothing before wait); the pinned pool stops allocating once it
// has grown; without staging a device buffer is refused naming the op. Every rank runs every
// case, with CHECK, so a wrong value on one rank never leaves the others waiting.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "mpi/mpi_process_group.hpp"
#include "tests/mpi/fake_device.hpp"

using skew::comm::MpiProcessGroup;
using skew::comm::ReduceOp;
using skew::comm::fake::Counters;
using skew::comm::fake::counters;
using skew::comm::fake::device_view;

namespace {

std::shared_ptr<MpiProcessGroup> staged_world() {
  return std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD, &skew::comm::fake::copies);
}

// Element j that rank a sends to rank b in the v-collectives, and how many it sends.
float sent_value(int a, int b, std::size_t j) {
  return static_cast<float>(a * 1000 + b * 10) + 0.25f * static_cast<float>(j);
}
std::size_t sent_count(int a, int b) {
  return static_cast<std::size_t>((a + 2 * b) % 3 + (a == b ? 1 : 0));
}

}  // namespace

TEST_CASE("mpi staging: allreduce, iallreduce and broadcast on device buffers", "[mpi][staging]") {
  auto g = staged_world();
  const int n = g->size(), r = g->rank();
  const std::size_t count = 37;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    std::vector<float> x(count), y(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = y[i] = static_cast<float>((r + 1) * static_cast<int>(i + 1)) + 0.5f;
    const Counters before = counters;
    g->allreduce(device_view(x), op);
    CHECK(counters.to_host_bytes - before.to_host_bytes == count * sizeof(float));
    CHECK(counters.to_device_bytes - before.to_device_bytes == count * sizeof(float));
    auto work = g->iallreduce(device_view(y), op);
    if (n > 1) CHECK(y[count - 1] == static_cast<float>((r + 1) * static_cast<int>(count)) + 0.5f);  // not before wait
    work->wait();
    INFO("op " << skew::comm::reduce_op_name(op));
    for (std::size_t i = 0; i < count; ++i) {
      const double v = static_cast<double>(i + 1);
      double want = v * n * (n + 1) / 2.0 + 0.5 * n;
      if (op == ReduceOp::Avg) want /= n;  // divided on the host before the copy back
      if (op == ReduceOp::Max) want = v * n + 0.5;
      CHECK(x[i] == Approx(want).epsilon(1e-6));
      CHECK(y[i] == Approx(want).epsilon(1e-6));
    }
  }
  std::vector<std::int64_t> big{std::int64_t{1} << 40, -3 - r};
  g->allreduce(device_view(big), ReduceOp::Sum);
  CHECK(big == std::vector<std::int64_t>{n * (std::int64_t{1} << 40), -3LL * n - n * (n - 1) / 2});

  const int root = n - 1;
  std::vector<double> b(5, -1.0);
  if (r == root)
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = root * 10.0 + static_cast<double>(i);
  const Counters before = counters;
  g->broadcast(device_view(b), root);
  // Only the root's values are read; the others' are only written.
  CHECK(counters.to_host_bytes - before.to_host_bytes == (r == root ? b.size() * sizeof(double) : 0));
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(b[i] == root * 10.0 + static_cast<double>(i));
}

TEST_CASE("mpi staging: allgather, allgatherv, alltoall and alltoallv leave unused tails alone", "[mpi][staging]") {
  auto g = staged_world();
  const int n = g->size(), r = g->rank();
  std::vector<std::int32_t> mine{r * 100, r * 100 + 1, r * 100 + 2}, all(3 * static_cast<std::size_t>(n), -1);
  g->allgather(device_view(mine), device_view(all));
  for (int p = 0; p < n; ++p)
    for (int j = 0; j < 3; ++j) CHECK(all[static_cast<std::size_t>(3 * p + j)] == p * 100 + j);

  constexpr float kTail = -7.f;  // beyond the counts: must survive the copy back
  std::vector<std::size_t> counts;
  for (int p = 0; p < n; ++p) counts.push_back(static_cast<std::size_t>((2 * p + 1) % 3));
  std::vector<float> part(counts[static_cast<std::size_t>(r)]);
  for (std::size_t j = 0; j < part.size(); ++j) part[j] = sent_value(r, r, j);
  std::vector<float> gathered(skew::comm::sum_counts(counts) + 2, kTail);
  g->allgatherv(device_view(part), device_view(gathered), counts);
  std::size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < counts[static_cast<std::size_t>(p)]; ++j) CHECK(gathered[at++] == sent_value(p, p, j));
  CHECK(gathered[at] == kTail);
  CHECK(gathered[at + 1] == kTail);

  std::vector<float> even(2 * static_cast<std::size_t>(n)), even_out(even.size(), kTail);
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < 2; ++j) even[2 * static_cast<std::size_t>(p) + j] = sent_value(r, p, j);
  g->alltoall(device_view(even), device_view(even_out));
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < 2; ++j) CHECK(even_out[2 * static_cast<std::size_t>(p) + j] == sent_value(p, r, j));

  std::vector<std::size_t> sc, rc;
  std::vector<float> send;
  for (int p = 0; p < n; ++p) {
    sc.push_back(sent_count(r, p));
    rc.push_back(sent_count(p, r));
    for (std::size_t j = 0; j < sent_count(r, p); ++j) send.push_back(sent_value(r, p, j));
  }
  send.push_back(123.f);  // a send buffer longer than its counts: the tail is not sent
  for (const bool blocking : {true, false}) {
    std::vector<float> recv(skew::comm::sum_counts(rc) + 1, kTail);
    const Counters before = counters;
    if (blocking) {
      g->alltoallv(device_view(send), sc, device_view(recv), rc);
    } else {
      auto work = g->ialltoallv(device_view(send), sc, device_view(recv), rc);
      if (n > 1) CHECK(recv[0] == kTail);  // nothing written before wait
      work->wait();
    }
    CHECK(counters.to_host_bytes - before.to_host_bytes == skew::comm::sum_counts(sc) * sizeof(float));
    CHECK(counters.to_device_bytes - before.to_device_bytes == skew::comm::sum_counts(rc) * sizeof(float));
    at = 0;
    for (int p = 0; p < n; ++p)
      for (std::size_t j = 0; j < sent_count(p, r); ++j) CHECK(recv[at++] == sent_value(p, r, j));
    CHECK(recv[at] == kTail);
  }
}

TEST_CASE("mpi staging: send, recv, isend, irecv and batches of device and host legs", "[mpi][staging]") {
  auto g = staged_world();
  const int n = g->size(), r = g->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const auto ring = [](int from, int i) { return 0.5 + from * 100.0 + i; };
  std::vector<double> out(7), in(7, -1.0);
  for (int i = 0; i < 7; ++i) out[static_cast<std::size_t>(i)] = ring(r, i);
  // isend (read at post) + blocking recv, then irecv + blocking send.
  auto sending = g->isend(device_view(out), next, 5);
  g->recv(device_view(in), prev, 5);
  sending->wait();
  for (int i = 0; i < 7; ++i) CHECK(in[static_cast<std::size_t>(i)] == ring(prev, i));
  std::fill(in.begin(), in.end(), -1.0);
  auto receiving = g->irecv(device_view(in), prev, 6);
  g->send(device_view(out), next, 6);
  receiving->wait();
  for (int i = 0; i < 7; ++i) CHECK(in[static_cast<std::size_t>(i)] == ring(prev, i));

  // Both directions in one batch; the backward leg on host buffers, the forward one on device.
  std::vector<double> host_out(out), host_in(7, -1.0);
  std::fill(in.begin(), in.end(), -1.0);
  auto batch = g->batch_isend_irecv({skew::comm::send_op(device_view(out), next, 8),
                                     skew::comm::recv_op(device_view(in), prev, 8),
                                     skew::comm::send_op(skew::comm::view(host_out), prev, 9),
                                     skew::comm::recv_op(skew::comm::view(host_in), next, 9)});
  batch->wait();
  batch->wait();  // a second wait copies nothing again and does not fail
  for (int i = 0; i < 7; ++i) {
    CHECK(in[static_cast<std::size_t>(i)] == ring(prev, i));
    CHECK(host_in[static_cast<std::size_t>(i)] == ring(next, i));
  }
}

TEST_CASE("mpi staging: the pinned pool grows, then repeated calls allocate nothing", "[mpi][staging]") {
  auto g = staged_world();
  const int n = g->size();
  const auto exchange = [&](std::size_t per_peer) {
    std::vector<float> s(per_peer * static_cast<std::size_t>(n), 1.5f), d(s.size());
    g->alltoall(device_view(s), device_view(d));
    CHECK(d.front() == 1.5f);
  };
  exchange(1000);
  const std::size_t warm = g->staging()->allocations();
  CHECK(warm >= 1);
  for (int i = 0; i < 20; ++i) exchange(1000);
  CHECK(g->staging()->allocations() == warm);
  exchange(1 << 17);  // larger than any block: the free blocks grow
  const std::size_t grown = g->staging()->allocations();
  CHECK(grown > warm);
  CHECK(grown <= warm + 2);  // one block each for the send and the receive side
  for (int i = 0; i < 5; ++i) exchange(1 << 15 | 17);
  CHECK(g->staging()->allocations() == grown);

  // Splits and subgroups stage through the same pool.
  auto half = g->split(g->rank() % 2, g->rank());
  CHECK(dynamic_cast<MpiProcessGroup&>(*half).staging() == g->staging());
  CHECK(dynamic_cast<MpiProcessGroup&>(*g->subgroup({g->rank()})).staging() == g->staging());
}

TEST_CASE("staging pool: leases held together get distinct blocks, a returned block is reused", "[mpi][staging]") {
  auto pool = std::make_shared<skew::comm::StagingPool>(skew::comm::fake::copies);
  void* first = nullptr;
  {
    const auto a = pool->lease(100), b = pool->lease(100);
    CHECK(a.data() != b.data());
    first = a.data();
    CHECK(pool->allocations() == 2);
  }
  const auto again = pool->lease(64);
  CHECK(pool->allocations() == 2);
  CHECK(again.data() == first);                          // the smallest free block that fits, first of equals
  const auto large = pool->lease(std::size_t{1} << 20);  // the free block grows in place of a new one
  CHECK(pool->allocations() == 3);
  CHECK(pool->pinned_bytes() == (std::size_t{1} << 16) + (std::size_t{1} << 20));
}

TEST_CASE("mpi group without staging refuses a device buffer, naming the op", "[mpi][staging]") {
  MpiProcessGroup g(MPI_COMM_WORLD, nullptr);
  CHECK(g.staging() == nullptr);
  std::vector<float> x(4, 1.f), y(4 * static_cast<std::size_t>(g.size()));
  CHECK_THROWS_WITH(g.allreduce(device_view(x), ReduceOp::Sum),
                    Catch::Contains("allreduce: buffer is on cuda but this build has no CUDA"));
  CHECK_THROWS_WITH(g.allgather(skew::comm::view(x), device_view(y)), Catch::Contains("allgather: buffer is on cuda"));
  CHECK_THROWS_WITH(g.isend(device_view(x), 0, 1), Catch::Contains("isend: buffer is on cuda"));
  g.allreduce(skew::comm::view(x), ReduceOp::Sum);  // host buffers are untouched by all this
  CHECK(x[3] == static_cast<float>(g.size()));
}
