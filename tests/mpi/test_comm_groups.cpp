// split(color, key) ordering and subgroup(ranks) correctness and reuse.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <vector>

#include "mpi/mpi_process_group.hpp"

using skew::comm::MpiProcessGroup;
using skew::comm::ReduceOp;

namespace {
std::shared_ptr<MpiProcessGroup> world() {
  return std::make_shared<MpiProcessGroup>(MPI_COMM_WORLD);
}

// Sum of the world ranks of a group's members, computed by the group itself.
int world_rank_sum(skew::comm::ProcessGroup& g) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::vector<std::int32_t> x{world_rank};
  g.allreduce(skew::comm::view(x), ReduceOp::Sum);
  return x[0];
}
}  // namespace

TEST_CASE("mpi group: split by color, ordered by key", "[mpi][groups]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  // Color = parity; key = -rank, so each group is numbered from its highest world rank down.
  auto sub = g->split(r % 2, -r);
  REQUIRE(sub != nullptr);
  std::vector<int> members;
  for (int p = n - 1; p >= 0; --p)
    if (p % 2 == r % 2) members.push_back(p);
  CHECK(sub->size() == static_cast<int>(members.size()));
  CHECK(sub->world_ranks() == members);
  CHECK(sub->world_rank_of(sub->rank()) == r);
  int expected_sum = 0;
  for (int p : members) expected_sum += p;
  CHECK(world_rank_sum(*sub) == expected_sum);
  // Broadcast from group rank 0 reaches the member with the highest world rank.
  std::vector<std::int32_t> x{r};
  sub->broadcast(skew::comm::view(x), 0);
  CHECK(x[0] == members.front());

  // A negative color joins no group.
  auto partial = g->split(r == 0 ? -1 : 0, r);
  if (r == 0) {
    CHECK(partial == nullptr);
  } else {
    REQUIRE(partial != nullptr);
    CHECK(partial->size() == n - 1);
    CHECK(partial->rank() == r - 1);
    CHECK(world_rank_sum(*partial) == n * (n - 1) / 2);
  }
}

TEST_CASE("mpi group: subgroup members, order and reuse", "[mpi][groups]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  const std::size_t created_before = g->subgroups_created();

  // Singleton groups, created by every rank at the same time without the others.
  auto self = g->subgroup({r});
  CHECK(self->size() == 1);
  CHECK(self->rank() == 0);
  CHECK(world_rank_sum(*self) == r);

  // Last and first rank, in that order: group rank follows the order given.
  const std::vector<int> ends = n > 1 ? std::vector<int>{n - 1, 0} : std::vector<int>{0};
  if (r == 0 || r == n - 1) {
    auto a = g->subgroup(ends);
    CHECK(a->size() == static_cast<int>(ends.size()));
    CHECK(a->world_ranks() == ends);
    CHECK(a->rank() == (r == n - 1 ? 0 : 1));
    CHECK(world_rank_sum(*a) == (n > 1 ? n - 1 : 0));
    const std::size_t created = g->subgroups_created();
    auto again = g->subgroup(ends);
    CHECK(again.get() == a.get());
    CHECK(g->subgroups_created() == created);
    CHECK(world_rank_sum(*again) == (n > 1 ? n - 1 : 0));
  }

  // The whole world as a subgroup, asked for twice.
  std::vector<int> everyone;
  for (int p = 0; p < n; ++p) everyone.push_back(p);
  auto all1 = g->subgroup(everyone);
  const std::size_t created = g->subgroups_created();
  const std::size_t cached = g->subgroup_cache_size();
  auto all2 = g->subgroup(everyone);
  CHECK(all1.get() == all2.get());
  CHECK(g->subgroups_created() == created);
  CHECK(g->subgroup_cache_size() == cached);
  CHECK(world_rank_sum(*all2) == n * (n - 1) / 2);
  // self, ends (first and last rank only) and everyone; with one rank all three are {0}.
  const std::size_t mine = n == 1 ? 1 : (r == 0 || r == n - 1 ? 3 : 2);
  CHECK(g->subgroups_created() - created_before == mine);

  // Subgroups of a subgroup use the subgroup's numbering.
  if (n >= 2) {
    auto sub = g->split(0, -r);  // reversed world
    auto last_two = sub->rank() < 2 ? sub->subgroup({0, 1}) : nullptr;
    if (last_two) CHECK(world_rank_sum(*last_two) == (n - 1) + (n - 2));
  }
}

TEST_CASE("mpi group: bad subgroup requests are refused locally", "[mpi][groups]") {
  auto g = world();
  const int n = g->size(), r = g->rank();
  CHECK_THROWS_WITH(g->subgroup({}), Catch::Contains("subgroup of no ranks"));
  CHECK_THROWS_WITH(g->subgroup({r, r}), Catch::Contains("lists a rank twice"));
  CHECK_THROWS_WITH(g->subgroup({r, n}), Catch::Contains("out of range"));
  if (n > 1) CHECK_THROWS_WITH(g->subgroup({(r + 1) % n}), Catch::Contains("not a member"));
}
