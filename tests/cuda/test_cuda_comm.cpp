// The communication layer on GPU buffers, under mpirun (np 1 and 2), each result against the same
// operation on host buffers: the MPI backend staging device tensors (ranks may share one GPU),
// the hybrid group (MPI for host buffers, NCCL for device buffers; NCCL needs a GPU per rank, so
// at np 2 those cases run only with 2 GPUs, and at np 1 they cover routing, collectives and a
// self send/recv), placement moves of device tensors, and the cost model timing the experts'
// device. Cases return early, saying why, when the GPUs they need are not there.
#include <cuda_runtime.h>
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <vector>

#include "lib/placement/cost_model.hpp"
#include "lib/placement/policy.hpp"
#include "mpi/hybrid_process_group.hpp"
#include "mpi/mpi_process_group.hpp"
#include "tests/cuda/node_place.hpp"
#include "tests/cuda/tensor_transfer.hpp"

using namespace skew;
using comm::ReduceOp;
using test::on_gpu;
using test::on_host;

namespace {

// Binds local rank % device count; false without the GPUs a case needs. No GPU at all says
// "SKIPPED: no CUDA device" (ctest then reports the test skipped); too few for one per rank, which
// NCCL needs, says so without that word, so that the np 2 run on one GPU still reports the
// staging and placement cases it did run.
bool bind_gpu(bool per_rank) {
  const auto [local_rank, local_size] = test::node_place();
  const int devices = cuda_device_count();
  if (devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return false;
  }
  if (per_rank && devices < local_size) {
    std::printf("NOT RUN: NCCL needs a GPU per rank, %d ranks share %d here\n", local_size, devices);
    return false;
  }
  REQUIRE(cudaSetDevice(local_rank % devices) == cudaSuccess);
  return true;
}

float value(int rank, std::size_t i) {
  return static_cast<float>(rank * 1000) + 0.25f * static_cast<float>(i % 301);
}

// The same collectives on host vectors and on device tensors through `g`; the device results
// must equal the host ones (the MPI host path is itself checked against closed forms).
void check_against_host(comm::ProcessGroup& g) {
  const int n = g.size(), r = g.rank();
  std::vector<float> x(4099);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = value(r, i);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min}) {
    std::vector<float> host = x;
    Tensor dev = on_gpu(x), idev = on_gpu(x);
    g.allreduce(comm::view(host), op);
    g.allreduce(comm::view(dev), op);
    g.iallreduce(comm::view(idev), op)->wait();
    INFO("op " << comm::reduce_op_name(op));
    // NCCL may sum in another order or average by scaling: equal within float rounding.
    const auto blocking = on_host<float>(dev), pending = on_host<float>(idev);
    for (std::size_t i = 0; i < host.size(); i += 13) {
      CHECK(blocking[i] == Approx(host[i]).epsilon(1e-6));
      CHECK(pending[i] == Approx(host[i]).epsilon(1e-6));
    }
  }
  // Uneven alltoallv with an empty pair.
  const auto count = [](int a, int b) { return static_cast<std::size_t>((a + 2 * b) % 3) * 517; };
  std::vector<std::size_t> sc, rc;
  std::vector<float> send;
  for (int p = 0; p < n; ++p) {
    sc.push_back(count(r, p));
    rc.push_back(count(p, r));
    for (std::size_t j = 0; j < count(r, p); ++j) send.push_back(value(r * n + p, j));
  }
  send.push_back(1.f);  // never empty, so the device tensor has an address
  std::vector<float> recv(comm::sum_counts(rc) + 1, -1.f);
  Tensor dsend = on_gpu(send), drecv = on_gpu(recv);
  g.alltoallv(comm::view(send), sc, comm::view(recv), rc);
  g.alltoallv(comm::view(dsend), sc, comm::view(drecv), rc);
  CHECK(on_host<float>(drecv) == recv);
  std::vector<double> b(33, r == n - 1 ? 2.5 : -1.0);
  Tensor db = on_gpu(b);
  g.broadcast(comm::view(db), n - 1);
  CHECK(on_host<double>(db) == std::vector<double>(33, 2.5));
  // A ring and a self exchange in one batch (at np 1 both are self send/recv).
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor ring_in = on_gpu(std::vector<float>(x.size(), -1.f)), self_in = on_gpu(std::vector<float>(7, -1.f));
  Tensor ring_out = on_gpu(x), self_out = on_gpu(std::vector<float>(x.begin(), x.begin() + 7));
  g.batch_isend_irecv({comm::send_op(comm::view(ring_out), next, 11), comm::recv_op(comm::view(ring_in), prev, 11)})
      ->wait();
  g.batch_isend_irecv({comm::send_op(comm::view(self_out), r, 12), comm::recv_op(comm::view(self_in), r, 12)})->wait();
  const auto got = on_host<float>(ring_in);
  for (std::size_t i = 0; i < got.size(); i += 97) CHECK(got[i] == value(prev, i));
  CHECK(on_host<float>(self_in) == std::vector<float>(x.begin(), x.begin() + 7));
}

}  // namespace

TEST_CASE("mpi group stages real device tensors: same results as host buffers", "[cuda][mpi][staging]") {
  if (!bind_gpu(false)) return;
  comm::MpiProcessGroup g(MPI_COMM_WORLD);
  REQUIRE(g.staging() != nullptr);
  check_against_host(g);
  const std::size_t warm = g.staging()->allocations();
  check_against_host(g);  // the same sizes again: the pinned pool allocates nothing more
  CHECK(g.staging()->allocations() == warm);
}

TEST_CASE("hybrid group: device tensors through NCCL, host buffers through MPI", "[cuda][nccl][hybrid]") {
  if (!bind_gpu(true)) return;
  auto g = comm::make_hybrid_group(MPI_COMM_WORLD);
  auto& hybrid = dynamic_cast<comm::HybridProcessGroup&>(*g);
  CHECK(g->backend() == "mpi+nccl");
  check_against_host(*g);
  // Host buffers took the MPI half above: the NCCL half refuses them.
  std::vector<float> host(3, 1.f);
  CHECK_THROWS_WITH(hybrid.device_half().allreduce(comm::view(host), ReduceOp::Sum),
                    Catch::Contains("buffer is on host but this backend works on cuda"));
  auto self = g->subgroup({g->rank()});
  CHECK(g->subgroup({g->rank()}).get() == self.get());
  Tensor u = on_gpu(std::vector<float>{2.5f});
  self->allreduce(comm::view(u), ReduceOp::Sum);
  CHECK(on_host<float>(u)[0] == 2.5f);
  auto reversed = g->split(0, -g->rank());  // ncclCommSplit where NCCL has it
  REQUIRE(reversed != nullptr);
  CHECK(reversed->rank() == g->size() - 1 - g->rank());
  check_against_host(*reversed);
  g->barrier();
}

namespace {

// Expert (layer 0, e) state: two tensors whose element j is known, on `device`.
float state_value(int expert, int tensor, std::size_t j) {
  return static_cast<float>(10 * expert + tensor) + 0.001f * static_cast<float>(j);
}

class DeviceStore : public placement::ExpertStateStore {
 public:
  DeviceStore(const placement::LayerPlacement& p, int rank, Device device) : device_(device) {
    for (int e : p.experts_on(rank)) {
      std::vector<Tensor> state;
      for (int i = 0; i < 2; ++i) {
        std::vector<float> v(i == 0 ? 1031 : 17);
        for (std::size_t j = 0; j < v.size(); ++j) v[j] = state_value(e, i, j);
        state.push_back(Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(device));
      }
      held_[e] = std::move(state);
    }
  }
  std::vector<Tensor*> replica_state(int, int expert) override { return {&held_.at(expert)[0], &held_.at(expert)[1]}; }
  void create_replica(int, int expert) override {
    held_[expert] = {Tensor::zeros({1031}, DType::F32, device_), Tensor::zeros({17}, DType::F32, device_)};
  }
  void drop_replica(int, int expert) override { held_.erase(expert); }
  void check(const placement::LayerPlacement& p, int rank) const {
    CHECK(held_.size() == p.experts_on(rank).size());
    for (int e : p.experts_on(rank))
      for (int i = 0; i < 2; ++i) {
        const Tensor& t = held_.at(e)[static_cast<std::size_t>(i)];
        CHECK(t.device() == device_);
        const auto v = on_host<float>(t);
        for (std::size_t j = 0; j < v.size(); ++j) REQUIRE(v[j] == state_value(e, i, j));
      }
  }

 private:
  Device device_;
  std::map<int, std::vector<Tensor>> held_;
};

// Every expert gains a replica on the next rank, then the placement returns.
void check_device_moves(comm::ProcessGroup& world) {
  const int n = world.size(), r = world.rank();
  const auto start = placement::LayerPlacement::block(2 * n, n, 4);
  auto wide = start;
  for (int e = 0; e < 2 * n; ++e) {
    const int home = wide.experts[static_cast<std::size_t>(e)][0].rank, other = (home + 1) % n;
    wide.experts[static_cast<std::size_t>(e)] = {{std::min(home, other), 0.5}, {std::max(home, other), 0.5}};
  }
  DeviceStore store(start, r, Device::Cuda);
  const auto sent = placement::apply_placement(world, store, {start}, {wide});
  store.check(wide, r);
  CHECK(sent[0] == 2 * (1031 + 17) * 4.0);  // two experts per rank, each to the next rank
  placement::apply_placement(world, store, {wide}, {start});
  store.check(start, r);
}

}  // namespace

TEST_CASE("placement moves device tensors GPU to GPU", "[cuda][placement]") {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) return;  // one rank holds every expert: nothing moves (the np 2 run covers this)
  if (!bind_gpu(false)) return;
  comm::MpiProcessGroup staged(MPI_COMM_WORLD);
  check_device_moves(staged);
  // A rank whose state is on the host while the other's is on the GPU: every rank refuses.
  const auto start = placement::LayerPlacement::block(2 * n, n, 4);
  auto moved = start;
  moved.experts[0] = {{0, 0.5}, {1, 0.5}};
  DeviceStore mixed(start, staged.rank(), staged.rank() == 0 ? Device::Host : Device::Cuda);
  CHECK_THROWS_WITH(placement::apply_placement(staged, mixed, {start}, {moved}),
                    Catch::Contains("expert state is on different devices"));
  if (!bind_gpu(true)) return;  // NCCL send/recv needs a GPU per rank
  check_device_moves(*comm::make_hybrid_group(MPI_COMM_WORLD));
}

TEST_CASE("cost model times the expert step on the experts' device", "[cuda][placement]") {
  comm::MpiProcessGroup world(MPI_COMM_WORLD);
  placement::CostConstants fixed{.gemm_flops = 0,
                                 .nvlink_bandwidth = 1e10,
                                 .alltoall_bandwidth = 1e10,
                                 .allreduce_bandwidth = 1e10,
                                 .gpus_per_node = 8,
                                 .alltoall_latency = 0};
  placement::ExpertShape shape{.params = 2 * 1024 * 4096, .hidden_dim = 1024};
  shape.device = Device::Cuda;
  if (cuda_device_count() == 0) {
    CHECK_THROWS_WITH(placement::measure_constants(world, fixed, shape),
                      Catch::Contains("experts run on cuda but no CUDA device is visible"));
    bind_gpu(false);  // says SKIPPED
    return;
  }
  if (!bind_gpu(false)) return;
  const double on_gpu_flops = placement::measure_constants(world, fixed, shape).gemm_flops;
  shape.device = Device::Host;
  const double on_host_flops = placement::measure_constants(world, fixed, shape).gemm_flops;
  INFO("GPU " << on_gpu_flops / 1e12 << " TFLOP/s, host " << on_host_flops / 1e12 << " TFLOP/s");
  CHECK(on_gpu_flops > 2 * on_host_flops);
}
