// apply_placement over MPI: a fake ExpertStateStore holding known tensors; after expand,
// migrate and shrink every replica holds its expert's values, dropped ones are freed, and a
// rank holding a different placement makes every rank throw instead of hanging.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <map>

#include "lib/placement/flexmoe.hpp"
#include "mpi/mpi_process_group.hpp"

using namespace skew;
using namespace skew::placement;

namespace {

// The value expert (layer, e) holds at element j of its state tensor i.
float state_value(int layer, int expert, int tensor, int j) {
  return static_cast<float>(1000 * layer + 10 * expert + tensor) + 0.001f * static_cast<float>(j);
}

class FakeStore : public ExpertStateStore {
 public:
  FakeStore(const std::vector<LayerPlacement>& layers, int rank) {
    for (std::size_t l = 0; l < layers.size(); ++l)
      for (int e : layers[l].experts_on(rank)) {
        create_replica(static_cast<int>(l), e);
        auto& state = held_[{static_cast<int>(l), e}];
        for (int i = 0; i < 2; ++i)
          for (std::size_t j = 0; j < state[static_cast<std::size_t>(i)].numel(); ++j)
            state[static_cast<std::size_t>(i)].data<float>()[j] =
                state_value(static_cast<int>(l), e, i, static_cast<int>(j));
      }
    created_ = 0;
  }
  std::vector<Tensor*> replica_state(int layer, int expert) override {
    auto it = held_.find({layer, expert});
    REQUIRE(it != held_.end());
    return {&it->second[0], &it->second[1]};
  }
  void create_replica(int layer, int expert) override {
    REQUIRE(held_.count({layer, expert}) == 0);
    std::vector<Tensor> state{Tensor::empty({3, 4}, DType::F32), Tensor::empty({5}, DType::F32)};
    for (auto& t : state)
      for (std::size_t j = 0; j < t.numel(); ++j) t.data<float>()[j] = -1.0f;  // must be overwritten
    held_[{layer, expert}] = std::move(state);
    ++created_;
  }
  void drop_replica(int layer, int expert) override { REQUIRE(held_.erase({layer, expert}) == 1); }

  // Checks that this rank holds exactly its replicas of `layers`, each with the right values.
  void check(const std::vector<LayerPlacement>& layers, int rank) const {
    std::size_t expected = 0;
    for (std::size_t l = 0; l < layers.size(); ++l)
      for (int e : layers[l].experts_on(rank)) {
        ++expected;
        auto it = held_.find({static_cast<int>(l), e});
        REQUIRE(it != held_.end());
        for (int i = 0; i < 2; ++i) {
          const Tensor& t = it->second[static_cast<std::size_t>(i)];
          for (std::size_t j = 0; j < t.numel(); ++j)
            REQUIRE(t.data<float>()[j] == state_value(static_cast<int>(l), e, i, static_cast<int>(j)));
        }
      }
    CHECK(held_.size() == expected);
  }
  int created() const { return created_; }

 private:
  std::map<std::pair<int, int>, std::vector<Tensor>> held_;
  int created_ = 0;
};

}  // namespace

TEST_CASE("apply_placement: expand, migrate and shrink move the right state", "[placement][executor][mpi]") {
  comm::MpiProcessGroup world(MPI_COMM_WORLD);
  const int n = world.size(), me = world.rank();
  const int experts = 2 * n;
  const std::vector<LayerPlacement> start{LayerPlacement::block(experts, n, 3), LayerPlacement::block(experts, n, 3)};
  FakeStore store(start, me);
  store.check(start, me);

  // Layer 0: expert 0 on every rank. Layer 1: the last expert moves from the last rank to rank 0.
  std::vector<LayerPlacement> next = start;
  next[0].experts[0].clear();
  for (int r = 0; r < n; ++r) next[0].experts[0].push_back({r, 1.0 / n});
  next[0].experts[0].back().share = 1.0 - (n - 1) * (1.0 / n);
  next[1].experts[static_cast<std::size_t>(experts - 1)] = {{0, 1.0}};
  // A replica's state is 12 + 5 floats (FakeStore): 68 bytes per transfer.
  constexpr double kReplicaBytes = 68;
  const std::vector<double> sent = apply_placement(world, store, start, next);
  store.check(next, me);
  CHECK(store.created() == 1);  // rank 0 receives layer 1's expert, every other rank expert 0
  // Rank 0 sends expert 0 to the n - 1 others; the last rank sends its expert to rank 0.
  CHECK(sent ==
        std::vector<double>{me == 0 ? (n - 1) * kReplicaBytes : 0.0, me == n - 1 && n > 1 ? kReplicaBytes : 0.0});

  // Back again: expert 0 shrinks to rank 0, the migrated expert returns to the last rank.
  const std::vector<double> sent_back = apply_placement(world, store, next, start);
  store.check(start, me);
  CHECK(sent_back == std::vector<double>{0.0, me == 0 && n > 1 ? kReplicaBytes : 0.0});
}

TEST_CASE("apply_placement: ranks holding different placements all throw", "[placement][executor][mpi]") {
  comm::MpiProcessGroup world(MPI_COMM_WORLD);
  const int n = world.size(), me = world.rank();
  const std::vector<LayerPlacement> start{LayerPlacement::block(2 * n, n, 3)};
  FakeStore store(start, me);
  std::vector<LayerPlacement> next = start;
  next[0].experts[0] = {{0, me == n - 1 ? 0.25 : 0.5}, {n - 1, me == n - 1 ? 0.75 : 0.5}};
  CHECK_THROWS_WITH(apply_placement(world, store, start, next),
                    Catch::Contains("placement disagreement: rank " + std::to_string(n - 1)));
  store.check(start, me);  // nothing moved
}

TEST_CASE("make_flexmoe_policy: measured cost constants are identical on every rank", "[placement][policy][mpi]") {
  comm::MpiProcessGroup world(MPI_COMM_WORLD);
  PlacementOptions options;  // as [placement] gpus_per_node = 2, nvlink_bandwidth = 5e10 give it
  options.cost_overrides.gpus_per_node = 2;
  options.cost_overrides.nvlink_bandwidth = 5e10;
  const auto policy = make_flexmoe_policy(options, world, 2, 2 * world.size(), 4096, 32);
  const CostConstants& c = policy->model().constants();
  CHECK(c.gemm_flops > 1e6);
  CHECK(c.alltoall_bandwidth > 1e3);
  CHECK(c.nvlink_bandwidth == 5e10);  // overridden, not measured
  CHECK(c.alltoall_latency >= 0.0);
  CHECK(c.alltoall_latency < 1.0);
  CHECK(c.gpus_per_node == 2);
  std::vector<double> mine{c.gemm_flops, c.alltoall_bandwidth, c.allreduce_bandwidth, c.alltoall_latency};
  std::vector<double> all(mine.size() * static_cast<std::size_t>(world.size()));
  world.allgather(comm::view(mine), comm::view(all));
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == mine[i % mine.size()]);
}
