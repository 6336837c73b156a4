// Cost model against hand-computed cases (4 ranks on 2 nodes, round numbers).
#include <catch2/catch.hpp>

#include "lib/placement/cost_model.hpp"

using namespace skew::placement;

namespace {

// 1000-parameter experts: 6000 FLOPs per token at 6 MFLOP/s = 1 ms per token. Tokens are
// 10 floats = 40 bytes. NVLink 4000 B/s, network 1000 B/s, all-reduce 2000 B/s, 2 GPUs a node.
CostModel tiny_model() {
  CostConstants c;
  c.gemm_flops = 6e6;
  c.intra_bandwidth = 4000;
  c.inter_bandwidth = 1000;
  c.allreduce_bandwidth = 2000;
  c.gpus_per_node = 2;
  ExpertShape s;
  s.params = 1000;
  s.hidden_dim = 10;
  return CostModel(c, s);
}

LayerPlacement with_slots(LayerPlacement p, int slots) {
  p.slots_per_rank = slots;
  return p;
}

}  // namespace

TEST_CASE("cost model: compute, all-to-all and step time of a block placement", "[placement][cost]") {
  const CostModel m = tiny_model();
  CHECK(m.compute_seconds(400) == Approx(0.4));
  // Rank 0 computes 400 tokens, 100 from each source: 4000 B from its node-mate (1 s over
  // NVLink) and 8000 B from the other node (8 s over the network): the busiest link, 8 s a
  // round, 4 rounds a step.
  CHECK(m.alltoall_seconds({400, 200, 200, 200}) == Approx(32.0));
  const auto p = LayerPlacement::block(4, 4, 2);
  const StepCost cost = m.predict(p, {400, 200, 200, 200});
  CHECK(cost.compute == Approx(0.4));
  CHECK(cost.alltoall == Approx(32.0));
  CHECK(cost.sync == 0.0);
  CHECK(cost.total() == Approx(32.4));
  // Node 1 computes nothing: rank 2 sends 2 x 2000 B off-node (4 s), rank 0 receives as much.
  CHECK(m.alltoall_seconds({200, 200, 0, 0}) == Approx(16.0));
  CHECK(m.alltoall_seconds({500}) == 0.0);
  // A fixed 0.5 s per round on top of the bandwidth term.
  CostConstants slow_start = m.constants();
  slow_start.alltoall_latency = 0.5;
  CHECK(CostModel(slow_start, m.shape()).alltoall_seconds({400, 200, 200, 200}) == Approx(4 * (8.0 + 0.5)));
}

TEST_CASE("cost model: replica gradient all-reduce and balance ratio", "[placement][cost]") {
  const CostModel m = tiny_model();
  // 4000 gradient bytes, 2 ranks: 2 * 1/2 * 4000 B over NVLink (4000 B/s) or all-reduce (2000 B/s).
  CHECK(m.allreduce_seconds(4000, {0, 1}) == Approx(1.0));
  CHECK(m.allreduce_seconds(4000, {0, 2}) == Approx(2.0));
  CHECK(m.allreduce_seconds(4000, {0, 1, 2, 3}) == Approx(2.0 * 3 / 4 * 4000 / 2000));
  CHECK(m.allreduce_seconds(4000, {3}) == 0.0);

  LayerPlacement p = with_slots(LayerPlacement::block(4, 4, 2), 2);
  p.experts[0] = {{0, 0.5}, {1, 0.5}};
  const StepCost cost = m.predict(p, {400, 200, 200, 200});
  CHECK(m.rank_loads(p, {400, 200, 200, 200}) == std::vector<double>{200, 400, 200, 200});
  CHECK(cost.compute == Approx(0.4));
  CHECK(cost.sync == Approx(1.0));
  CHECK(cost.busiest == Approx(1.4));  // rank 1: 0.4 s compute + 1 s all-reduce
  CHECK(cost.total() == Approx(33.4));
  // Replicas on ranks 0 and 2 (two nodes): 2 s all-reduce; rank 2 computes 0.4 s.
  p.experts[0] = {{0, 0.5}, {2, 0.5}};
  const StepCost spread = m.predict(p, {400, 200, 200, 200});
  CHECK(spread.busiest == Approx(2.4));
  CHECK(spread.total() == Approx(2.4 + 32.0));
  CHECK(balance_ratio({200, 400, 200, 200}) == Approx(1.6));
  CHECK(balance_ratio({0, 0}) == 1.0);
}

TEST_CASE("cost model: change cost of new replicas", "[placement][cost]") {
  const CostModel m = tiny_model();
  const auto before = LayerPlacement::block(4, 4, 2);
  LayerPlacement expand = before, migrate = before, two = before;
  expand.experts[0] = {{0, 0.5}, {1, 0.5}};
  migrate.experts[0] = {{2, 1.0}};
  two.experts[0] = {{0, 0.25}, {1, 0.25}, {2, 0.25}, {3, 0.25}};
  two.experts[1] = {{1, 0.5}, {2, 0.5}};
  // 12000 state bytes over NVLink (4000 B/s) or the network (1000 B/s).
  CHECK(m.change_seconds(before, expand) == Approx(3.0));
  CHECK(m.change_seconds(before, migrate) == Approx(12.0));
  CHECK(m.change_seconds(before, before) == 0.0);
  // Rank 2 receives expert 0 (from rank 0, off-node) and expert 1 (from rank 1, off-node).
  CHECK(m.change_seconds(before, two) == Approx(24.0));
  const auto transfers = plan_transfers(before, two);
  REQUIRE(transfers.size() == 4);
  CHECK(transfers[0].expert == 0);
  CHECK(transfers[0].src == 0);
  CHECK(transfers[0].dst == 1);
  CHECK(transfers[3].expert == 1);
  CHECK(transfers[3].dst == 2);
}
