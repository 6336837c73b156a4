// The [placement] keys (apps/placement_options) and their settings as lib/placement's options.
#include <catch2/catch.hpp>

#include "apps/placement_options.hpp"
#include "core/config.hpp"

using namespace skew;
using namespace skew::placement;

namespace {
PlacementOptions placement_options_from_config(const Config& config) {
  return placement_options(placement_settings(config));
}
int slots_per_rank_from_config(const Config& config, int num_experts, int world_size) {
  return slots_per_rank(placement_settings(config), num_experts, world_size);
}
}  // namespace

TEST_CASE("placement config keys: defaults, overrides and derived values", "[placement][config]") {
  skew::Schema schema("t", "test");
  add_placement_keys(schema);
  const auto cfg = skew::Config::parse_ini_text(schema, "[placement]\nthreshold = 1.5\ngemm_flops = 2e12\n", "test.ini",
                                                {"--placement.shares=even"});
  const skew::placement::PlacementOptions p = placement_options_from_config(cfg);
  const auto& o = p.flexmoe;
  CHECK(o.threshold == 1.5);
  CHECK(o.planner.interval == 50);
  CHECK(o.smoothing == 0.3);
  CHECK(o.warmup == 5);
  CHECK(o.planner.noise_z == 3.0);
  CHECK(o.planner.lookahead == 4);
  CHECK(o.planner.variance_per_token == Approx(0.7 / 1.3));  // an average with smoothing 0.3
  CHECK(!o.planner.balanced_shares);
  CHECK(p.cost_overrides.gemm_flops == 2e12);
  CHECK(p.cost_overrides.alltoall_bandwidth == 0.0);  // measured at start-up
  CHECK(p.cost_overrides.alltoall_latency == -1.0);   // measured at start-up
  CHECK(slots_per_rank_from_config(cfg, 8, 4) == 3);
  CHECK(p.shape.state_bytes_per_param == 12);
  CHECK(o.planner.variant == skew::placement::PlannerVariant::Paper);
  CHECK(o.planner.hedge == 0.02);
  const auto hedged = skew::Config::parse_ini_text(schema, "", "x", {"--placement.flexmoe_variant=hedge"});
  CHECK(placement_options_from_config(hedged).flexmoe.planner.variant == skew::placement::PlannerVariant::Hedge);
  CHECK_THROWS_WITH(skew::Config::parse_ini_text(schema, "", "x", {"--placement.flexmoe_variant=greedy"}),
                    Catch::Contains("placement.flexmoe_variant"));
  CHECK_THROWS_WITH(skew::Config::parse_ini_text(schema, "", "x", {"--placement.shares=odd"}),
                    Catch::Contains("placement.shares"));
}

TEST_CASE("placement config keys: node size, link overrides and range checks", "[placement][config]") {
  skew::Schema schema("t", "test");
  add_placement_keys(schema);
  const auto parse = [&](std::vector<std::string> args) {
    return skew::Config::parse_ini_text(schema, "[placement]\ngpus_per_node = 2\nnvlink_bandwidth = 5e10\n", "t.ini",
                                        args);
  };
  const auto p = placement_options_from_config(parse({"--placement.slots_per_rank=5"}));
  CHECK(p.cost_overrides.gpus_per_node == 2);
  CHECK(p.cost_overrides.nvlink_bandwidth == 5e10);
  CHECK(p.cost_overrides.allreduce_bandwidth == 0.0);  // measured at start-up
  CHECK(p.slots_per_rank == 5);
  CHECK(slots_per_rank_from_config(parse({"--placement.slots_per_rank=5"}), 8, 4) == 5);
  // Ranges are checked when the config is parsed, naming the key, the value and the source.
  CHECK_THROWS_WITH(placement_options_from_config(parse({"--placement.gpus_per_node=0"})),
                    Catch::Contains("command line: bad value '0' for key 'placement.gpus_per_node'"));
  CHECK_THROWS_WITH(placement_options_from_config(parse({"--placement.hedge=-0.5"})),
                    Catch::Contains("bad value '-0.5' for key 'placement.hedge': expected a finite number >= 0"));
  CHECK_THROWS_WITH(slots_per_rank_from_config(parse({"--placement.slots_per_rank=-1"}), 8, 4),
                    Catch::Contains("bad value '-1' for key 'placement.slots_per_rank': expected an integer in [0, "));
  CHECK_THROWS_WITH(parse({"--placement.smoothing=1"}),
                    Catch::Contains("bad value '1' for key 'placement.smoothing': expected a finite number in [0, 1)"));
  CHECK_THROWS_WITH(parse({"--placement.threshold=nan"}), Catch::Contains("key 'placement.threshold'"));
  CHECK_THROWS_WITH(parse({"--placement.gemm_flops=inf"}), Catch::Contains("key 'placement.gemm_flops'"));
  CHECK_THROWS_WITH(parse({"--placement.alltoall_latency=-2"}),
                    Catch::Contains("key 'placement.alltoall_latency': expected a finite number >= -1"));
  CHECK_THROWS_WITH(parse({"--placement.interval=4294967297"}), Catch::Contains("key 'placement.interval'"));
  CHECK_THROWS_WITH(slots_per_rank_from_config(parse({}), 6, 4),
                    Catch::Contains("moe.num_experts 6 must be a multiple of the 4 ranks"));
}
