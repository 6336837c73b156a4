// The deepspeed policy on 1, 2 and 4 ranks against closed forms of DeepSpeed's sharded_moe.py:
// the capacity, the padded [experts, capacity, d_model] buffer every expert computes over, which
// assignments an overfull expert keeps (position, top-2's first choices first, top-k token
// order, random token selection), the output of kept and dropped tokens against the dropless
// layer, and the model's gradients against finite differences.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "lib/moe/policies/deepspeed.hpp"
#include "lib/placement/deepspeed_capacity.hpp"
#include "tests/mpi/moe_model_fixture.hpp"

using namespace skew_moe_fixture;

namespace {

constexpr int kExperts = 4, kWidth = 6;

MoeOptions layer_options(Policy policy, int k) {
  MoeOptions o;
  o.d_model = kWidth, o.d_ff = 10;
  o.gate.num_experts = kExperts, o.gate.top_k = k;
  o.policy = policy;
  return o;
}

// One forward of a layer on `n` tokens of this rank, with a gate sharp enough to overload some
// experts; `forced` (n * k expert ids) replaces the gate's choices when given.
struct Forward {
  std::vector<double> y;
  std::vector<char> kept;
  std::vector<std::int32_t> expert;
  std::vector<double> weight;
  std::vector<std::int64_t> local_counts;
  std::int64_t dropped = 0, padded = 0, rows = 0;
  double alltoall_bytes = 0;
};
Forward forward(const MoeOptions& o, int n, const std::vector<std::int32_t>& forced = {}, StepContext ctx = {}) {
  MoeLayer<double> layer(o, world(), LayerPlacement::block(kExperts, world().size(), kExperts));
  layer.init_experts(4, 0, 0.5);
  Rng rng(21, static_cast<std::uint64_t>(world().rank()));
  std::vector<double> x(static_cast<std::size_t>(n) * kWidth), wg(kWidth * kExperts), y(x.size());
  for (auto& v : x) v = rng.normal();
  Rng gate_rng(22, 0);  // the same router on every rank
  for (auto& v : wg) v = 2.0 * gate_rng.normal();
  ctx.forced = forced.empty() ? nullptr : forced.data();
  layer.forward(n, x.data(), wg.data(), ctx, y.data());
  return {y,
          layer.kept(),
          layer.gate_state().expert.host_copy(),
          layer.gate_state().weight.host_copy(),
          layer.gate_state().local_counts,
          layer.dropped(),
          layer.padded(),
          layer.computed_rows(),
          layer.times().alltoall_bytes};
}

std::int64_t global_sum(std::int64_t v) {
  std::vector<std::int64_t> s = {v};
  world().allreduce(comm::view(s), comm::ReduceOp::Sum);
  return s[0];
}

}  // namespace

TEST_CASE("deepspeed capacity is DeepSpeed's _capacity: ceil(tokens / experts * factor * k), at least min_capacity",
          "[moe]") {
  // tokens, experts, k, factor, min_capacity -> slots, worked by hand.
  CHECK(placement::deepspeed_capacity(512, 4, 1, 1.0, 4) == 128);
  CHECK(placement::deepspeed_capacity(512, 8, 2, 1.25, 4) == 160);  // 64 * 2.5
  CHECK(placement::deepspeed_capacity(100, 3, 1, 1.0, 4) == 34);    // 33.3 up
  CHECK(placement::deepspeed_capacity(20, 4, 1, 0.5, 4) == 4);      // 2.5 -> 3, raised to min_capacity
  CHECK(placement::deepspeed_capacity(20, 4, 1, 0.5, 0) == 3);
  CHECK(placement::deepspeed_capacity(10, 4, 3, 1.0, 0) == 8);  // 7.5 up
  CHECK(placement::deepspeed_capacity(24, 4, 2, 1.5, 0) == 18);
}

TEST_CASE("deepspeed computes every expert over the padded [experts, capacity, d_model] buffer", "[moe]") {
  const int N = world().size(), n = 24;
  for (int k : {1, 2})
    for (double factor : {0.5, 1.5})
      for (std::int64_t min_capacity : {std::int64_t{0}, std::int64_t{16}})
        for (bool training : {true, false}) {
          MoeOptions o = layer_options(Policy::DeepSpeed, k);
          o.capacity_factor_train = factor, o.capacity_factor_eval = factor + 1.0;
          o.min_capacity = min_capacity;
          StepContext ctx;
          ctx.training = training;
          const Forward f = forward(o, n, {}, ctx);
          const double used = training ? factor : factor + 1.0;
          const std::int64_t C = std::max(static_cast<std::int64_t>(std::ceil(n / 4.0 * used * k)), min_capacity);
          INFO("k " << k << " factor " << used << " min_capacity " << min_capacity << " capacity " << C);
          // Each rank holds E / N experts, each computing C rows from each of the N ranks.
          REQUIRE(f.rows == kExperts * C);
          std::int64_t over = 0;
          for (auto c : f.local_counts) over += std::max<std::int64_t>(0, c - C);
          REQUIRE(f.dropped == global_sum(over));
          REQUIRE(f.padded == N * kExperts * C - (static_cast<std::int64_t>(N) * n * k - f.dropped));
          // The all-to-all moves whole buffers: C rows to each expert on another rank and back,
          // forward and backward, counted as 2 * 8 bytes * d_model per row each way.
          const double rows_out = (kExperts - kExperts / N) * C, rows_in = (N - 1) * (kExperts / N) * C;
          REQUIRE(f.alltoall_bytes == Approx(2.0 * 8 * kWidth * (rows_out + rows_in)));
        }
}

TEST_CASE("deepspeed drops by DeepSpeed's order on constructed routings", "[moe]") {
  const int N = world().size(), n = 24;
  SECTION("top-1, everything to one expert: the first capacity tokens are kept (use_rts off)") {
    MoeOptions o = layer_options(Policy::DeepSpeed, 1);
    o.use_rts = false;
    const Forward f = forward(o, n, std::vector<std::int32_t>(n, 2));
    const std::int64_t C = 6;  // ceil(24 / 4 * 1.0), above min_capacity 4
    REQUIRE(f.dropped == N * (n - C));
    for (int t = 0; t < n; ++t) REQUIRE(f.kept[static_cast<std::size_t>(t)] == (t < C));
  }
  SECTION("top-2: first choices before second ones, earlier tokens first") {
    // Token t: first choice t % 2, second the other one of experts 0 and 1; each gets n / 2
    // first and n / 2 second choices for C = ceil(24 / 4 * 1.5 * 2) = 18 slots.
    MoeOptions o = layer_options(Policy::DeepSpeed, 2);
    o.capacity_factor_train = 1.5;
    std::vector<std::int32_t> forced;
    for (int t = 0; t < n; ++t) forced.insert(forced.end(), {t % 2, 1 - t % 2});
    const Forward f = forward(o, n, forced);
    REQUIRE(f.dropped == N * (n - 18) * 2);
    for (int t = 0; t < n; ++t) {
      INFO("token " << t);
      REQUIRE(f.kept[static_cast<std::size_t>(t) * 2] == 1);
      REQUIRE(f.kept[static_cast<std::size_t>(t) * 2 + 1] == (t < 12));  // the first 6 second choices per expert
    }
  }
  SECTION("top-3: token order whatever the choice rank") {
    // Token t chooses t % 4, then t + 1, t + 2 (mod 4): each expert gets 18 assignments of mixed
    // rank for C = ceil(24 / 4 * 0.5 * 3) = 9 slots and keeps its first 9 tokens.
    MoeOptions o = layer_options(Policy::DeepSpeed, 3);
    o.capacity_factor_train = 0.5;
    std::vector<std::int32_t> forced;
    for (int t = 0; t < n; ++t) forced.insert(forced.end(), {t % 4, (t + 1) % 4, (t + 2) % 4});
    const Forward f = forward(o, n, forced);
    REQUIRE(f.dropped == N * kExperts * (18 - 9));
    std::vector<int> seen(kExperts, 0);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < 3; ++j) {
        const int e = forced[static_cast<std::size_t>(t) * 3 + j];
        INFO("token " << t << " choice " << j);
        REQUIRE(f.kept[static_cast<std::size_t>(t) * 3 + j] == (seen[e]++ < 9));
      }
  }
  SECTION("drop_policy = probability keeps the most probable") {
    MoeOptions o = layer_options(Policy::DeepSpeed, 1);
    o.drop_by_probability = true;
    const Forward f = forward(o, n, std::vector<std::int32_t>(n, 1));
    REQUIRE(f.dropped == N * (n - 6));
    double least_kept = 1, most_dropped = 0;
    for (int t = 0; t < n; ++t) {
      const double p = f.weight[static_cast<std::size_t>(t)];
      if (f.kept[static_cast<std::size_t>(t)])
        least_kept = std::min(least_kept, p);
      else
        most_dropped = std::max(most_dropped, p);
    }
    REQUIRE(least_kept > most_dropped);
  }
}

TEST_CASE("random token selection keeps exactly capacity random tokens, reproducibly per seed", "[moe]") {
  const int N = world().size(), n = 40;
  MoeOptions o = layer_options(Policy::DeepSpeed, 1);  // use_rts: DeepSpeed's default
  REQUIRE(o.use_rts);
  const std::vector<std::int32_t> all_to_one(n, 1);
  const std::int64_t C = 10;  // ceil(40 / 4)
  auto kept_with = [&](std::uint64_t seed, std::int64_t iteration, int layer) {
    StepContext ctx;
    ctx.seed = seed, ctx.iteration = iteration, ctx.layer = layer;
    const Forward f = forward(o, n, all_to_one, ctx);
    REQUIRE(f.dropped == N * (n - C));
    REQUIRE(std::count(f.kept.begin(), f.kept.end(), 1) == C);
    return f.kept;
  };
  const std::vector<char> a = kept_with(7, 3, 0);
  REQUIRE(kept_with(7, 3, 0) == a);  // deterministic for a seed and step
  REQUIRE(kept_with(8, 3, 0) != a);
  REQUIRE(kept_with(7, 4, 0) != a);
  REQUIRE(kept_with(7, 3, 1) != a);
  std::vector<char> first(n, 0);
  std::fill(first.begin(), first.begin() + C, 1);
  REQUIRE(a != first);
  // Ranks draw differently.
  if (N > 1) {
    std::vector<char> rank0 = a;
    MPI_Bcast(rank0.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (world().rank() == 1) REQUIRE(rank0 != a);
  }
  // Over many seeds every token is kept with probability C / n = 1/4 (300 draws: sd 0.025).
  std::vector<int> times_kept(n, 0);
  const int seeds = 300;
  for (int s = 0; s < seeds; ++s) {
    const std::vector<char> kept = kept_with(100 + static_cast<std::uint64_t>(s), 0, 0);
    for (int t = 0; t < n; ++t) times_kept[static_cast<std::size_t>(t)] += kept[static_cast<std::size_t>(t)];
  }
  for (int t = 0; t < n; ++t) {
    INFO("token " << t);
    REQUIRE(times_kept[static_cast<std::size_t>(t)] / double(seeds) == Approx(0.25).margin(0.12));
  }
  // An expert at or under capacity keeps all its tokens.
  StepContext ctx;
  ctx.seed = 7;
  std::vector<std::int32_t> spread(n);
  for (int t = 0; t < n; ++t) spread[static_cast<std::size_t>(t)] = t % 4;
  REQUIRE(forward(o, n, spread, ctx).dropped == 0);
}

TEST_CASE("deepspeed output: kept assignments as the dropless layer computes them, dropped ones zero", "[moe]") {
  const int n = 24;
  for (int k : {1, 2})
    for (bool rts : {true, false}) {
      MoeOptions o = layer_options(Policy::DeepSpeed, k);
      o.capacity_factor_train = 0.5, o.use_rts = rts;
      StepContext ctx;
      ctx.seed = 3;
      const Forward ds = forward(o, n, {}, ctx);
      INFO("k " << k << " use_rts " << rts << " dropped " << ds.dropped);
      REQUIRE(ds.dropped > 0);
      if (k == 1) REQUIRE(ds.padded > 0);  // top-2 fills every expert of this sharp gate
      // The dropless layer, once per choice rank, forced to that choice: the token's output from
      // that one expert, weighted by its gate probability.
      std::vector<double> want(ds.y.size(), 0.0);
      for (int j = 0; j < k; ++j) {
        std::vector<std::int32_t> choice(n);
        for (int t = 0; t < n; ++t)
          choice[static_cast<std::size_t>(t)] = ds.expert[static_cast<std::size_t>(t) * k + j];
        const Forward one = forward(layer_options(Policy::Static, 1), n, choice);
        for (int t = 0; t < n; ++t)
          if (ds.kept[static_cast<std::size_t>(t) * k + j])
            for (int c = 0; c < kWidth; ++c)
              want[static_cast<std::size_t>(t) * kWidth + c] += one.y[static_cast<std::size_t>(t) * kWidth + c];
      }
      int zero_tokens = 0;
      for (int t = 0; t < n; ++t) {
        bool any = false;
        for (int j = 0; j < k; ++j) any = any || ds.kept[static_cast<std::size_t>(t) * k + j];
        zero_tokens += !any;
        for (int c = 0; c < kWidth; ++c) {
          const double got = ds.y[static_cast<std::size_t>(t) * kWidth + c];
          INFO("token " << t << " column " << c);
          if (!any) REQUIRE(got == 0.0);
          REQUIRE(got == Approx(want[static_cast<std::size_t>(t) * kWidth + c]).margin(1e-12));
        }
      }
      if (k == 1) REQUIRE(zero_tokens > 0);
    }
}

TEST_CASE("deepspeed gradients match finite differences with drops and padding", "[moe]") {
  const int N = world().size();
  for (int k : {1, 2}) {
    ModelOptions o = tiny(4, k);
    o.moe.policy = Policy::DeepSpeed;
    // 20 tokens per rank, 5 * k assignments per expert on average; slots: top-1 max(ceil(2.5), 5),
    // top-2 ceil(5 * 1.0 * 2) = 10, so some experts of this batch overflow and others are padded.
    o.moe.capacity_factor_train = 0.5 * k, o.moe.min_capacity = 5;
    GptMoe<double> m(o, world(), block_placements(o, N, 4));
    m.init(3);
    check_finite_differences(m, make_batch(o, 4 * N, world().rank(), N));
    std::int64_t dropped = 0, padded = 0;
    for (auto& layer : m.moe()) dropped += layer->dropped(), padded += layer->padded();
    INFO("k " << k);
    REQUIRE(dropped > 0);
    REQUIRE(padded > 0);
  }
}

TEST_CASE("deepspeed dropless mode: nothing dropped, every expert padded to the largest load", "[moe]") {
  const int N = world().size();
  ModelOptions o = tiny(4, 2);
  o.moe.policy = Policy::DeepSpeed;
  o.moe.drop_tokens = false;
  GptMoe<double> m(o, world(), block_placements(o, N, 4));
  m.init(7);
  run(m, make_batch(o, 4 * N, world().rank(), N), false);
  for (auto& layer : m.moe()) {
    std::vector<std::int64_t> counts = layer->gate_state().local_counts;
    std::vector<std::int64_t> mx = {*std::max_element(counts.begin(), counts.end())};
    world().allreduce(comm::view(mx), comm::ReduceOp::Max);
    std::int64_t total = 0;
    for (auto c : layer->gate_state().global_counts) total += c;
    REQUIRE(layer->dropped() == 0);
    REQUIRE(layer->padded() == mx[0] * 4 * N - total);
    REQUIRE(layer->computed_rows() == 4 / N * N * mx[0]);  // min_capacity does not apply
  }
}
