// MpiProcessGroup collectives against closed-form values, for any number of ranks. Every rank
// runs every case; checks use CHECK (not REQUIRE) so a wrong value on one rank never leaves
// the others waiting in the next collective.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "mpi/mpi_process_group.hpp"

using skew::comm::MpiProcessGroup;
using skew::comm::ReduceOp;

namespace {

std::shared_ptr<MpiProcessGroup> world() {
  return std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD);
}

// Rank r holds x_i = (r + 1) * (i + 1) + base; sums, extremes and means follow in closed form.
template <typename T>
void check_allreduce(MpiProcessGroup& g, T base) {
  const int n = g.size(), r = g.rank();
  const std::size_t count = 37;
  const auto value = [&](int rank, std::size_t i) { return static_cast<T>((rank + 1) * static_cast<T>(i + 1) + base); };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<T> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = value(r, i);
    g.allreduce(skew::comm::view(x), op);
    INFO("op " << skew::comm::reduce_op_name(op) << " dtype " << skew::dtype_name(skew::dtype_of<T>()));
    for (std::size_t i = 0; i < count; ++i) {
      const T sum = static_cast<T>(static_cast<T>(i + 1) * n * (n + 1) / 2 + base * n);
      T want = sum;
      if (op == ReduceOp::Avg) want = static_cast<T>(sum / n);
      if (op == ReduceOp::Max) want = value(n - 1, i);
      if (op == ReduceOp::Min) want = value(0, i);
      CHECK(x[i] == want);
    }
  }
}

}  // namespace

TEST_CASE("mpi group: identity of the world group", "[mpi]") {
  auto g = world();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(g->rank() == rank);
  CHECK(g->size() == size);
  CHECK(g->backend() == "mpi");
  for (int r = 0; r < size; ++r) CHECK(g->world_rank_of(r) == r);
}

TEST_CASE("mpi group: allreduce sum/avg/max/min for f32, f64, i32, i64", "[mpi]") {
  auto g = world();
  check_allreduce<float>(*g, 0.5f);
  check_allreduce<double>(*g, -0.25);
  check_allreduce<std::int32_t>(*g, -3);
  check_allreduce<std::int64_t>(*g, std::int64_t{1} << 40);  // beyond 32 bits
}

TEST_CASE("mpi group: broadcast from each root", "[mpi]") {
  auto g = world();
  for (int root = 0; root < g->size(); ++root) {
    std::vector<double> x(5, -1.0);
    if (g->rank() == root)
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = root * 100.0 + static_cast<double>(i);
    g->broadcast(skew::comm::view(x), root);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == root * 100.0 + static_cast<double>(i));
  }
  std::vector<float> y(1);
  CHECK_THROWS_WITH(g->broadcast(skew::comm::view(y), g->size()), Catch::Contains("broadcast root"));
}

TEST_CASE("mpi group: allgather and allgatherv with uneven and zero counts", "[mpi]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  std::vector<std::int32_t> mine(3), all(static_cast<std::size_t>(3 * n), -1);
  for (int j = 0; j < 3; ++j) mine[static_cast<std::size_t>(j)] = r * 10 + j;
  g->allgather(skew::comm::view(mine), skew::comm::view(all));
  for (int p = 0; p < n; ++p)
    for (int j = 0; j < 3; ++j) CHECK(all[static_cast<std::size_t>(p * 3 + j)] == p * 10 + j);

  // Rank p contributes (2p + 1) % 3 elements: 1, 0, 2, 1, ... (rank 1 sends nothing).
  const auto count_of = [](int p) { return static_cast<std::size_t>((2 * p + 1) % 3); };
  std::vector<std::size_t> counts;
  for (int p = 0; p < n; ++p) counts.push_back(count_of(p));
  std::vector<float> send(count_of(r));
  for (std::size_t j = 0; j < send.size(); ++j) send[j] = static_cast<float>(r * 100 + static_cast<int>(j));
  std::vector<float> recv(skew::comm::sum_counts(counts), -1.0f);
  g->allgatherv(skew::comm::view(send), skew::comm::view(recv), counts);
  std::size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < count_of(p); ++j)
      CHECK(recv[at++] == static_cast<float>(p * 100 + static_cast<int>(j)));
  CHECK(at == recv.size());

  std::vector<float> wrong(send.size() + 1);
  CHECK_THROWS_WITH(g->allgatherv(skew::comm::view(wrong), skew::comm::view(recv), counts),
                    Catch::Contains("differs from recv_counts"));
  std::vector<double> recv_f64(recv.size());
  CHECK_THROWS_WITH(g->allgatherv(skew::comm::view(send), skew::comm::view(recv_f64), counts),
                    Catch::Contains("dtype mismatch"));
  std::vector<std::int32_t> small(1);
  CHECK_THROWS_WITH(g->allgather(skew::comm::view(mine), skew::comm::view(small)),
                    Catch::Contains("receive buffer holds 1"));
}

TEST_CASE("mpi group: alltoall and uneven alltoallv with zero-length peers", "[mpi]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  std::vector<std::int64_t> send(static_cast<std::size_t>(2 * n)), recv(static_cast<std::size_t>(2 * n), -1);
  for (int p = 0; p < n; ++p)
    for (int j = 0; j < 2; ++j) send[static_cast<std::size_t>(2 * p + j)] = r * 1000 + p * 10 + j;
  g->alltoall(skew::comm::view(send), skew::comm::view(recv));
  for (int p = 0; p < n; ++p)
    for (int j = 0; j < 2; ++j) CHECK(recv[static_cast<std::size_t>(2 * p + j)] == p * 1000 + r * 10 + j);

  // Rank a sends (a + 2b) % 3 elements to rank b: several pairs exchange nothing.
  const auto sends = [](int a, int b) { return static_cast<std::size_t>((a + 2 * b) % 3); };
  std::vector<std::size_t> sc, rc;
  for (int p = 0; p < n; ++p) {
    sc.push_back(sends(r, p));
    rc.push_back(sends(p, r));
  }
  std::vector<double> vs, vr(skew::comm::sum_counts(rc), -1.0);
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < sends(r, p); ++j) vs.push_back(r * 1000.0 + p * 10.0 + static_cast<double>(j));
  for (const bool nonblocking : {false, true}) {
    std::fill(vr.begin(), vr.end(), -1.0);
    if (nonblocking) {
      auto work = g->ialltoallv(skew::comm::view(vs), sc, skew::comm::view(vr), rc);
      work->wait();
      CHECK(work->test());
    } else {
      g->alltoallv(skew::comm::view(vs), sc, skew::comm::view(vr), rc);
    }
    std::size_t at = 0;
    for (int p = 0; p < n; ++p)
      for (std::size_t j = 0; j < sends(p, r); ++j) CHECK(vr[at++] == p * 1000.0 + r * 10.0 + static_cast<double>(j));
  }

  // Everyone sends nothing at all.
  std::vector<std::size_t> zeros(static_cast<std::size_t>(n), 0);
  std::vector<float> none;
  g->alltoallv(skew::comm::view(none), zeros, skew::comm::view(none), zeros);

  std::vector<std::size_t> short_counts(static_cast<std::size_t>(n) + 1, 0);
  CHECK_THROWS_WITH(g->alltoallv(skew::comm::view(vs), short_counts, skew::comm::view(vr), rc),
                    Catch::Contains("counts for a group of"));
  std::vector<double> other_type(send.size());
  CHECK_THROWS_WITH(g->alltoall(skew::comm::view(send), skew::comm::view(other_type)),
                    Catch::Contains("dtype mismatch I64 -> F64"));
  std::vector<std::int64_t> longer(static_cast<std::size_t>(2 * n + 1));
  CHECK_THROWS_WITH(g->alltoall(skew::comm::view(send), skew::comm::view(longer)), Catch::Contains("size()*n"));
}

TEST_CASE("mpi group: send/recv, a ring of isend/irecv, barrier", "[mpi]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  std::vector<float> out(4), in(4, -1.0f);
  for (int j = 0; j < 4; ++j) out[static_cast<std::size_t>(j)] = static_cast<float>(r * 10 + j);
  auto rx = g->irecv(skew::comm::view(in), left, 7);
  auto tx = g->isend(skew::comm::view(out), right, 7);
  tx->wait();
  rx->wait();
  for (int j = 0; j < 4; ++j) CHECK(in[static_cast<std::size_t>(j)] == static_cast<float>(left * 10 + j));

  if (n >= 2 && r < 2) {
    // Blocking pair exchange 0 <-> 1, then a short message is reported, not silently accepted.
    std::vector<std::int32_t> msg{r + 5, r + 6, r + 7}, got(3, 0), longer(5, 0);
    if (r == 0) {
      g->send(skew::comm::view(msg), 1, 3);
      g->recv(skew::comm::view(got), 1, 3);
      CHECK(got == std::vector<std::int32_t>{6, 7, 8});
      g->send(skew::comm::view(msg), 1, 4);
    } else {
      g->recv(skew::comm::view(got), 0, 3);
      g->send(skew::comm::view(msg), 0, 3);
      CHECK(got == std::vector<std::int32_t>{5, 6, 7});
      CHECK_THROWS_WITH(g->recv(skew::comm::view(longer), 0, 4), Catch::Contains("got 3 elements, expected 5"));
    }
  }
  g->barrier();
}

TEST_CASE("mpi group: batch_isend_irecv exchanges large messages with sends listed first", "[mpi]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  // Far above any eager limit: a blocking send-then-receive on every rank would hang here.
  const std::size_t count = 1u << 20;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  std::vector<double> to_right(count), to_left(count), from_left(count, -1.0), from_right(count, -1.0);
  for (std::size_t i = 0; i < count; ++i) {
    to_right[i] = r * 1e7 + static_cast<double>(i);
    to_left[i] = -(r * 1e7 + static_cast<double>(i));
  }
  using skew::comm::recv_op;
  using skew::comm::send_op;
  auto work = g->batch_isend_irecv(
      {send_op(skew::comm::view(to_right), right, 11), send_op(skew::comm::view(to_left), left, 12),
       recv_op(skew::comm::view(from_left), left, 11), recv_op(skew::comm::view(from_right), right, 12)});
  work->wait();
  work->wait();  // a second completion is harmless
  for (std::size_t i : {std::size_t{0}, count / 3, count - 1}) {
    CHECK(from_left[i] == left * 1e7 + static_cast<double>(i));
    CHECK(from_right[i] == -(right * 1e7 + static_cast<double>(i)));
  }
  CHECK_THROWS_WITH(g->batch_isend_irecv({send_op(skew::comm::view(to_right), n, 1)}),
                    Catch::Contains("outside a group of"));
  g->barrier();
}

TEST_CASE("mpi group: iallreduce completes through test() and applies the average", "[mpi]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  std::vector<double> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (r + 1) * static_cast<double>(i);
  auto work = g->iallreduce(skew::comm::view(x), ReduceOp::Avg);
  while (!work->test()) {
  }
  work->wait();  // a second completion is harmless
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(static_cast<double>(i) * (n + 1) / 2.0));
  {
    std::vector<float> y(3, static_cast<float>(r));
    auto dropped = g->iallreduce(skew::comm::view(y), ReduceOp::Max);
    // Destroying unfinished work waits for it.
    dropped.reset();
    CHECK(y == std::vector<float>(3, static_cast<float>(n - 1)));
  }
}

TEST_CASE("mpi group: misuse and MPI errors become skew::Error", "[mpi]") {
  auto g = world();
  std::vector<std::uint16_t> halves(4);
  skew::comm::Buffer half_buf{halves.data(), halves.size(), skew::DType::BF16, skew::Device::Host};
  CHECK_THROWS_WITH(g->allreduce(half_buf, ReduceOp::Sum), Catch::Contains("cannot reduce BF16"));
  // (device buffers: test_comm_staging.cpp)
  skew::comm::Buffer null_buf{nullptr, 3, skew::DType::F32, skew::Device::Host};
  CHECK_THROWS_WITH(g->broadcast(null_buf, 0), Catch::Contains("null buffer with 3 elements"));
  std::vector<float> one(1);
  CHECK_THROWS_WITH(g->send(skew::comm::view(one), g->size() + 5, 0),
                    Catch::Contains("MPI call") && Catch::Contains("failed"));
}
