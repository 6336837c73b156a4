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
  c.nvlink_bandwidth = 4000;
  c.alltoall_bandwidth = 1000;
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

TEST_CASE("cost model: all-to-all follows the locality-first replica split", "[placement][cost]") {
  // 2 ranks, one per node (network 1000 B/s, 40 B a token). Expert 0 (400 tokens, 200 from each
  // source) has a replica on both ranks, expert 1 (100 tokens) lives on rank 1.
  CostConstants c = tiny_model().constants();
  c.gpus_per_node = 1;
  const CostModel m(c, tiny_model().shape());
  LayerPlacement p = LayerPlacement::block(2, 2, 2);
  p.experts[0] = {{0, 0.5}, {1, 0.5}};
  // Each replica's target (200) is met by its own rank's 200 tokens: nothing of expert 0
  // crosses; rank 0 sends its 50 tokens of expert 1: 2000 B, 2 s a round, 8 s a step. (Sources
  // splitting every expert by share would send 150 tokens to rank 1: 24 s.)
  auto t = m.dispatch_traffic(p, {400, 100});
  CHECK(t[0].send_inter == Approx(50));
  CHECK(t[1].recv_inter == Approx(50));
  CHECK(t[0].recv_inter == 0.0);
  CHECK(t[1].send_inter == 0.0);
  CHECK(m.predict(p, {400, 100}).alltoall == Approx(8.0));
  // Shares 1/4 and 3/4: rank 0 keeps 100 of its 200, sends 100 to rank 1 with the 50 of
  // expert 1: 150 tokens = 6000 B, 6 s a round.
  p.experts[0] = {{0, 0.25}, {1, 0.75}};
  t = m.dispatch_traffic(p, {400, 100});
  CHECK(t[0].send_inter == Approx(150));
  CHECK(t[1].recv_inter == Approx(150));
  CHECK(m.predict(p, {400, 100}).alltoall == Approx(24.0));

  // 4 ranks on 2 nodes: expert 0 (400) on ranks 0 and 2 at 1/2 each. Ranks 0 and 2 keep their
  // 100; rank 1's 100 fill rank 0's room, rank 3's rank 2's: all of expert 0 stays inside the
  // nodes. Experts 1-3 (200 each) take 50 from every other rank.
  const CostModel four = tiny_model();
  LayerPlacement q = LayerPlacement::block(4, 4, 2);
  q.experts[0] = {{0, 0.5}, {2, 0.5}};
  const auto u = four.dispatch_traffic(q, {400, 200, 200, 200});
  CHECK(u[0].send_intra == Approx(50));   // expert 1 to rank 1
  CHECK(u[0].send_inter == Approx(100));  // experts 2, 3
  CHECK(u[0].recv_intra == Approx(100));  // rank 1's part of expert 0
  CHECK(u[0].recv_inter == 0.0);
  CHECK(u[1].send_intra == Approx(100));  // its part of expert 0, to rank 0
  CHECK(u[2].recv_intra == Approx(150));  // rank 3's part of experts 0 and 2
  CHECK(u[3].send_intra == Approx(150));
  CHECK(u[3].recv_inter == Approx(100));
  // Busiest link: 100 tokens = 4000 B over the network, 4 s a round.
  CHECK(four.alltoall_traffic_seconds(u) == Approx(16.0));
  // One replica per expert: the equal-parts form gives the same numbers as the split.
  const auto block = LayerPlacement::block(4, 4, 2);
  CHECK(four.alltoall_traffic_seconds(four.dispatch_traffic(block, {400, 200, 200, 200})) ==
        Approx(four.alltoall_seconds({400, 200, 200, 200})));
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
  // Replicas on ranks 0 and 2 (two nodes): 2 s all-reduce; rank 2 computes 0.4 s; expert 0's
  // tokens stay inside the nodes (see the locality test): 16 s of all-to-all.
  p.experts[0] = {{0, 0.5}, {2, 0.5}};
  const StepCost spread = m.predict(p, {400, 200, 200, 200});
  CHECK(spread.busiest == Approx(2.4));
  CHECK(spread.total() == Approx(2.4 + 16.0));
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

TEST_CASE("cost model: one sender's concurrent transfers share its link", "[placement][cost]") {
  const CostModel m = tiny_model();  // 2 ranks a node; 12000 state bytes, network 1000 B/s
  const auto before = LayerPlacement::block(4, 4, 2);
  LayerPlacement fan_out = before, disjoint = before;
  // Rank 0 copies expert 0 to ranks 2 and 3 (both off-node): its network link carries 24000
  // bytes, 24 s, though each receiver takes only 12 s.
  fan_out.experts[0] = {{0, 1.0 / 3}, {2, 1.0 / 3}, {3, 1.0 / 3}};
  CHECK(m.change_seconds(before, fan_out) == Approx(24.0));
  // Two senders to two receivers on disjoint links run in parallel: 12 s.
  disjoint.experts[0] = {{0, 0.5}, {2, 0.5}};
  disjoint.experts[1] = {{1, 0.5}, {3, 0.5}};
  CHECK(m.change_seconds(before, disjoint) == Approx(12.0));
}
