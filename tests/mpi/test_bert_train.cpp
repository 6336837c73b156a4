// moe_train with model.arch=bert on 2 ranks: every policy computes the static dropless run's
// function (same validation loss within fp32 tolerance when nothing is dropped), and the
// masked-LM measures are reported.
#include <catch2/catch.hpp>

#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

TEST_CASE("bert: every policy gives the static dropless validation loss", "[moe][bert]") {
  const Schema schema = moe_train_schema();
  const std::vector<std::string> common = {"--model.arch=bert", "--train.iterations=8", "--train.eval_sequences=32"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  const Json base = run(schema, with({}));
  INFO(base.dump());
  REQUIRE(base["dropped"].get<std::int64_t>() == 0);
  // 8 sequences of 32 bytes per rank and step: about 15% of the 512 positions are chosen.
  const double chosen = base["final_masked_tokens"].get<double>();
  REQUIRE(chosen > 40);
  REQUIRE(chosen < 120);
  REQUIRE(base["final_val_masked_accuracy"].get<double>() >= 0);
  REQUIRE(base["final_val_masked_accuracy"].get<double>() <= 1);
  const Json deepspeed = run(schema, with({"--moe.policy=deepspeed", "--moe.drop_tokens=false"}));
  // Compute-bound cost constants: fastermoe shadows its hot experts; flexmoe re-places every 2 steps.
  const Json fastermoe = run(schema, with({"--moe.policy=fastermoe", "--placement.gemm_flops=1e3",
                                           "--placement.alltoall_bandwidth=1e12", "--placement.nvlink_bandwidth=1e12",
                                           "--placement.allreduce_bandwidth=1e12", "--placement.alltoall_latency=0"}));
  const Json flexmoe = run(schema, with({"--moe.policy=flexmoe", "--placement.interval=2", "--placement.threshold=1.0",
                                         "--placement.warmup=1", "--placement.noise_z=0", "--placement.gemm_flops=1e6",
                                         "--placement.smoothing=0.5"}));
  REQUIRE(flexmoe["placement_changes"].get<std::int64_t>() > 0);
  for (const Json* other : {&deepspeed, &fastermoe, &flexmoe}) {
    INFO((*other)["policy"] << ": " << other->dump());
    REQUIRE((*other)["dropped"].get<std::int64_t>() == 0);
    // Same routing and the same math; only the order of floating-point sums differs.
    REQUIRE((*other)["final_val_loss"].get<double>() == Approx(base["final_val_loss"].get<double>()).epsilon(1e-4));
    REQUIRE((*other)["final_masked_tokens"] == base["final_masked_tokens"]);
  }
}
