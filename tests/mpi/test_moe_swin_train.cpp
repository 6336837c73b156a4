// moe_train with model.arch = swin on 2 ranks, on the generated image set (tests never need the
// MNIST download): training beats chance by far and reports its held-out accuracy; every policy
// that drops nothing gives the static run's validation loss; resume is bit-exact; the routing trace
// records and replays.
#include <catch2/catch.hpp>
#include <cmath>

#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

namespace {

// 28 x 28 images, patch 2, window 7: stage 1 is 14 x 14 in 4 windows (shifted in block 1),
// stage 2 is 7 x 7 in one window, MoE in its second block.
const char* kSwin = R"(
[data]
generated_images = 2000
[model]
arch = swin
d_model = 16
heads = 2
d_ff = 32
moe_every = 2
init_std = 0.1
[moe]
num_experts = 4
top_k = 2
d_ff = 32
[train]
batch_size = 8
iterations = 6
lr = 1e-2
warmup = 5
eval_interval = 0
eval_sequences = 200
log_interval = 0
)";

Json run_swin(std::vector<std::string> overrides) {
  return moe::train(moe_train_options(Config::parse_ini_text(moe_train_schema(), kSwin, "test", overrides)), world());
}

}  // namespace

TEST_CASE("swin-moe learns the generated images far above chance and reports held-out accuracy", "[moe][swin]") {
  const std::string dir = scratch("swin_learn");
  const Json s =
      run_swin({"--train.iterations=80", "--train.eval_interval=40", "--output.metrics=" + dir + "/m.jsonl"});
  INFO(s.dump());
  REQUIRE(s["held_out_images"].get<std::int64_t>() == 200);
  REQUIRE(s["final_val_accuracy"].get<double>() > 0.3);  // 10 classes: chance is 0.1
  REQUIRE(s["final_val_loss"].get<double>() < std::log(10.0) - 0.5);
  REQUIRE(s["dropped"].get<std::int64_t>() == 0);
  world().barrier();
  // Evaluations at iterations 40 and 80 put the accuracy in their records (rank 0 writes them).
  int evaluated = 0;
  for (const Json& rec : read_jsonl(dir + "/m.jsonl"))
    if (rec.contains("val_loss")) {
      ++evaluated;
      REQUIRE(rec["val_accuracy"].get<double>() >= 0.0);
    }
  REQUIRE(evaluated == 2);
}

TEST_CASE("every dropless policy trains swin-moe to the static run's validation loss", "[moe][swin]") {
  const std::vector<std::string> costs = {"--placement.gemm_flops=1e3", "--placement.alltoall_bandwidth=1e12",
                                          "--placement.nvlink_bandwidth=1e12", "--placement.allreduce_bandwidth=1e12",
                                          "--placement.alltoall_latency=0"};
  const auto with_costs = [&](std::vector<std::string> args) {
    args.insert(args.end(), costs.begin(), costs.end());
    return args;
  };
  const Json reference = run_swin({});
  const std::vector<std::vector<std::string>> policies = {
      {"--moe.policy=deepspeed", "--moe.drop_tokens=false"},
      with_costs({"--moe.policy=fastermoe", "--placement.gpus_per_node=1"}),
      with_costs({"--moe.policy=flexmoe", "--placement.interval=2", "--placement.threshold=1.0", "--placement.warmup=1",
                  "--placement.noise_z=0"})};
  for (const auto& args : policies) {
    const Json s = run_swin(args);
    INFO(args[0] << ": " << s.dump() << "\nstatic: " << reference.dump());
    REQUIRE(s["dropped"].get<std::int64_t>() == 0);
    // The same function and updates in another summation order: fp32 rounding apart.
    REQUIRE(s["final_val_loss"].get<double>() == Approx(reference["final_val_loss"].get<double>()).epsilon(1e-4));
    REQUIRE(s["final_val_accuracy"].get<double>() ==
            Approx(reference["final_val_accuracy"].get<double>()).margin(0.011));
    if (args[0] == "--moe.policy=flexmoe") REQUIRE(s["placement_changes"].get<std::int64_t>() > 0);
  }
}

TEST_CASE("swin-moe resumes from a checkpoint bit-exactly", "[moe][swin]") {
  const std::string a = scratch("swin_straight"), b = scratch("swin_resumed");
  const Json straight = run_swin({"--output.checkpoint_dir=" + a});
  run_swin({"--output.checkpoint_dir=" + b, "--output.checkpoint_interval=3"});
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(b + "/step_00000006");
  world().barrier();
  const Json resumed = run_swin({"--output.checkpoint_dir=" + b, "--output.resume=true"});
  REQUIRE(resumed["final_loss"].get<double>() == straight["final_loss"].get<double>());
  REQUIRE(resumed["final_val_loss"].get<double>() == straight["final_val_loss"].get<double>());
  const std::string shard = "/step_00000006/rank_0000" + std::to_string(world().rank()) + ".safetensors";
  require_identical_shards(a + shard, b + shard);
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(a), std::filesystem::remove_all(b);
}

TEST_CASE("swin-moe records its routing and replays it under another policy and gate", "[moe][swin]") {
  const std::string dir = scratch("swin_trace");
  // A stronger balance loss routes differently from the recorded run unless the trace forces it.
  const std::vector<std::string> other = {"--moe.policy=deepspeed", "--moe.drop_tokens=false", "--moe.aux_weight=1",
                                          "--train.lr=0.05"};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), other.begin(), other.end());
    return args;
  };
  run_swin({"--moe.save_trace=" + dir + "/trace", "--output.metrics=" + dir + "/a.jsonl"});
  run_swin(with({"--moe.replay_trace=" + dir + "/trace", "--output.metrics=" + dir + "/b.jsonl"}));
  run_swin(with({"--output.metrics=" + dir + "/c.jsonl"}));
  world().barrier();
  const auto a = read_jsonl(dir + "/a.jsonl"), b = read_jsonl(dir + "/b.jsonl"), c = read_jsonl(dir + "/c.jsonl");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  bool differs_unforced = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i]["tokens_per_expert"] == b[i]["tokens_per_expert"]);
    differs_unforced = differs_unforced || a[i]["tokens_per_expert"] != c[i]["tokens_per_expert"];
  }
  REQUIRE(differs_unforced);
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}
