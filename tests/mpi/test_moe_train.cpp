// moe_train's loop on 2 ranks: a short training falls below the unigram entropy of its data; the
// deepspeed policy computes its padded buffers in every step.
#include <catch2/catch.hpp>

#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

TEST_CASE("a short training run falls clearly below the unigram entropy", "[moe]") {
  const Schema schema = moe_train_schema();
  const Json s = run(schema, {});
  INFO(s.dump());
  REQUIRE(s["final_val_loss"].get<double>() < s["unigram_entropy"].get<double>() - 0.4);
  REQUIRE(s["dropped"].get<std::int64_t>() == 0);
}

TEST_CASE("bf16 mixed-precision training learns as well as fp32", "[moe]") {
  const Schema schema = moe_train_schema();
  const Json fp32 = run(schema, {});
  const Json bf16 = run(schema, {"--train.precision=bf16"});
  INFO(fp32.dump() << "\n" << bf16.dump());
  REQUIRE(bf16["final_val_loss"].get<double>() < bf16["unigram_entropy"].get<double>() - 0.4);
  // With fp32 master weights the bf16 run ends within a few hundredths of a nat of fp32's, and it
  // did compute differently.
  REQUIRE(std::abs(bf16["final_val_loss"].get<double>() - fp32["final_val_loss"].get<double>()) < 0.05);
  REQUIRE(bf16["final_val_loss"].get<double>() != fp32["final_val_loss"].get<double>());
}

TEST_CASE("deepspeed training computes [experts, capacity] rows per rank and layer in every step", "[moe]") {
  const Schema schema = moe_train_schema();
  const Json s =
      run(schema, {"--moe.policy=deepspeed", "--moe.top_k=1", "--moe.capacity_factor=0.5", "--train.iterations=3"});
  INFO(s.dump());
  // 8 sequences of 32 tokens per rank: 256 tokens, ceil(256 / 4 * 0.5) = 32 slots per expert.
  const std::int64_t ranks = world().size(), steps = 3 * 2, tokens = 256, slots = 32;
  const std::int64_t kept = steps * ranks * tokens - s["dropped"].get<std::int64_t>();
  REQUIRE(s["dropped"].get<std::int64_t>() > 0);
  REQUIRE(s["padded"].get<std::int64_t>() + kept == steps * ranks * 4 * slots);
}

TEST_CASE("fastermoe decides its shadows on the [placement] cost model", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("fastermoe");
  // One rank a node. Expert compute at 1 kFLOP/s against 1 TB/s links: every hot expert pays for
  // its shadow. The same routing with a 1 B/s all-reduce across nodes: no shadow ever does.
  const auto shadows = [&](const std::string& gemm_flops, const std::string& allreduce_bw) {
    const std::string metrics = dir + "/m" + allreduce_bw + ".jsonl";
    const Json s =
        run(schema, {"--moe.policy=fastermoe", "--train.iterations=6", "--placement.gemm_flops=" + gemm_flops,
                     "--placement.alltoall_bandwidth=1e12", "--placement.nvlink_bandwidth=1e12",
                     "--placement.allreduce_bandwidth=" + allreduce_bw, "--placement.alltoall_latency=0",
                     "--placement.gpus_per_node=1", "--output.metrics=" + metrics});
    CHECK(s["cost_constants"]["gemm_flops"].get<double>() == std::stod(gemm_flops));
    world().barrier();
    std::size_t n = 0;
    for (const Json& rec : read_jsonl(metrics))
      for (const auto& layer : rec["shadowed"]) n += layer.size();
    return n;
  };
  const std::size_t compute_bound = shadows("1e3", "1e12"), network_bound = shadows("1e15", "1");
  if (world().size() > 1) CHECK(compute_bound > 0);
  CHECK(network_bound == 0);
}
