// moe_train's loop on 2 ranks: bit-exact resume from a checkpoint (GPT and BERT), trace replay reproducing the
// recorded routing under another policy, and FlexMoE placement changes keeping the model function.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "core/fileio.hpp"
#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

TEST_CASE("resume from a checkpoint continues bit-exactly", "[moe]") {
  // Both families: BERT's masks are drawn anew in every step too, keyed by the iteration.
  const std::string arch = GENERATE("gpt", "bert");
  INFO("model.arch=" << arch);
  const Schema schema = moe_train_schema();
  const std::string a = scratch("straight"), b = scratch("resumed");
  // Top-1 deepspeed: random token selection draws anew in every step, and a resumed run draws the same.
  const std::vector<std::string> common = {"--train.iterations=6", "--moe.policy=deepspeed", "--moe.top_k=1",
                                           "--moe.capacity_factor=0.8", "--model.arch=" + arch};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  const Json straight = run(schema, with({"--output.checkpoint_dir=" + a}));
  // A run checkpointing at 3 and 6; drop step 6 and resume from step 3 to the end.
  const std::string c = b;
  run(schema, with({"--output.checkpoint_dir=" + c, "--output.checkpoint_interval=3"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(c + "/step_00000006");
  MPI_Barrier(MPI_COMM_WORLD);
  const Json resumed = run(schema, with({"--output.checkpoint_dir=" + c, "--output.resume=true"}));
  REQUIRE(resumed["final_loss"].get<double>() == straight["final_loss"].get<double>());
  const std::string shard = "/step_00000006/rank_0000" + std::to_string(world().rank()) + ".safetensors";
  require_identical_shards(a + shard, c + shard);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(a), std::filesystem::remove_all(b);
}

TEST_CASE("flexmoe resumes bit-exactly: same losses, same placements, the index is checked", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("flexresume");
  // Cost constants given, so no run measures them; plans every 2 iterations from the smoothed
  // load history, which the checkpoint must carry for the resumed run to plan identically.
  const std::vector<std::string> common = {"--train.iterations=8",
                                           "--moe.policy=flexmoe",
                                           "--placement.interval=2",
                                           "--placement.threshold=1.0",
                                           "--placement.warmup=1",
                                           "--placement.noise_z=0",
                                           "--placement.gemm_flops=1e6",
                                           "--placement.alltoall_bandwidth=1e9",
                                           "--placement.nvlink_bandwidth=1e9",
                                           "--placement.allreduce_bandwidth=1e9",
                                           "--placement.alltoall_latency=0",
                                           "--placement.smoothing=0.8"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  const Json straight =
      run(schema, with({"--output.checkpoint_dir=" + dir + "/a", "--output.metrics=" + dir + "/a.jsonl"}));
  REQUIRE(straight["placement_changes"].get<std::int64_t>() > 0);
  run(schema, with({"--output.checkpoint_dir=" + dir + "/b", "--output.checkpoint_interval=3"}));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir + "/b/step_00000008");
  MPI_Barrier(MPI_COMM_WORLD);
  const Json resumed = run(schema, with({"--output.checkpoint_dir=" + dir + "/b", "--output.resume=true",
                                         "--output.metrics=" + dir + "/b.jsonl"}));
  REQUIRE(resumed["final_loss"].get<double>() == straight["final_loss"].get<double>());
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/a.jsonl"), b = read_jsonl(dir + "/b.jsonl");
    REQUIRE(a.size() == 8);
    REQUIRE(b.size() == 2);  // iterations 6 and 7
    bool changed_after_resume = false;
    for (std::size_t i = 0; i < b.size(); ++i) {
      const Json& x = a[i + 6];
      REQUIRE(x["iter"] == b[i]["iter"]);
      REQUIRE(x["loss"].get<double>() == b[i]["loss"].get<double>());
      REQUIRE(x.contains("placement_change") == b[i].contains("placement_change"));
      if (x.contains("placement_change")) {
        REQUIRE(x["placement_change"]["placement"] == b[i]["placement_change"]["placement"]);
        changed_after_resume = true;
      }
    }
    REQUIRE(changed_after_resume);
    // The index names every tensor's shards, dtype and shape, and the placements.
    const Json index = Json::parse(read_file(dir + "/a/step_00000008/index.json"));
    REQUIRE(index["step"] == 8);
    REQUIRE(index["world_size"] == world().size());
    REQUIRE(index["policy"] == "flexmoe");
    REQUIRE(index["placement"].size() == 2);
    REQUIRE(index["tensors"]["dense.w"]["files"].size() == static_cast<std::size_t>(world().size()));
    REQUIRE(index["tensors"]["flexmoe.monitor_estimate"]["shape"] == Json::array({2, 4}));
    REQUIRE(index["tensors"]["flexmoe.monitor_estimate"]["dtype"] == "F64");
  }
  const std::string shard = "/step_00000008/rank_0000" + std::to_string(world().rank()) + ".safetensors";
  require_identical_shards(dir + "/a" + shard, dir + "/b" + shard);
  MPI_Barrier(MPI_COMM_WORLD);
  // Resume refuses another policy, and an index that does not describe the shard.
  REQUIRE_THROWS_WITH(run(schema, {"--output.checkpoint_dir=" + dir + "/a", "--output.resume=true"}),
                      Catch::Contains("was written under moe.policy=\"flexmoe\" but this run has moe.policy=static"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) {
    Json index = Json::parse(read_file(dir + "/a/step_00000008/index.json"));
    index["tensors"]["dense.w"]["shape"] = Json::array({1});
    write_file_atomic(dir + "/a/step_00000008/index.json", index.dump());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  REQUIRE_THROWS_WITH(run(schema, with({"--output.checkpoint_dir=" + dir + "/a", "--output.resume=true"})),
                      Catch::Contains("tensor dense.w is") && Catch::Contains("in the index"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a replayed routing trace gives another policy identical traffic", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("trace");
  run(schema, {"--train.iterations=5", "--moe.save_trace=" + dir + "/trace", "--output.metrics=" + dir + "/a.jsonl"});
  run(schema, {"--train.iterations=5", "--moe.replay_trace=" + dir + "/trace", "--output.metrics=" + dir + "/b.jsonl",
               "--moe.policy=deepspeed", "--moe.drop_tokens=false"});
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/a.jsonl"), b = read_jsonl(dir + "/b.jsonl");
    REQUIRE(a.size() == 5);
    REQUIRE(b.size() == 5);
    for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i]["tokens_per_expert"] == b[i]["tokens_per_expert"]);
    REQUIRE(b.back()["padded"].get<std::int64_t>() > 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("flexmoe re-places experts without changing the model function", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("flexmoe");
  const std::vector<std::string> common = {"--train.iterations=8", "--moe.aux_weight=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  run(schema, with({"--output.metrics=" + dir + "/static.jsonl"}));
  const Json flex = run(schema, with({"--moe.policy=flexmoe", "--placement.interval=2", "--placement.threshold=1.0",
                                      "--placement.warmup=1", "--placement.noise_z=0", "--placement.gemm_flops=1e6",
                                      "--placement.smoothing=0.5", "--output.metrics=" + dir + "/flex.jsonl"}));
  REQUIRE(flex["placement_changes"].get<std::int64_t>() > 0);
  if (world().rank() == 0) {
    const auto a = read_jsonl(dir + "/static.jsonl"), b = read_jsonl(dir + "/flex.jsonl");
    REQUIRE(a.size() == b.size());
    // Same routing and same math; only the order of floating-point sums over replicas differs.
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i]["tokens_per_expert"] == b[i]["tokens_per_expert"]);
      REQUIRE(b[i]["loss"].get<double>() == Approx(a[i]["loss"].get<double>()).epsilon(1e-4));
    }
    // Move bytes: every (expert, rank) replica new in a change receives the parameters and both
    // AdamW moments, 3 x 4 bytes x (2 x 32 x 64 + 64 + 32) = 50304 bytes, from one sender.
    const auto replicas = [](const std::string& text) {  // "N=2 S=3 e0:0@1, e1:0@0.5,1@0.5, ..."
      std::set<std::pair<int, int>> out;
      std::istringstream words(text);
      for (std::string w; words >> w;) {
        if (w[0] != 'e') continue;
        const int e = std::stoi(w.substr(1));
        std::istringstream reps(w.substr(w.find(':') + 1));
        for (std::string r; std::getline(reps, r, ',');) out.insert({e, std::stoi(r)});
      }
      return out;
    };
    std::vector<std::set<std::pair<int, int>>> held(2, replicas("N=2 S=3 e0:0@1, e1:0@1, e2:1@1, e3:1@1,"));
    int moved = 0;
    for (const auto& rec : b)
      for (int l = 0; l < 2; ++l) {
        double bytes = 0;
        for (const auto& rank : rec["per_rank"]["move_bytes"]) bytes += rank[l].get<double>();
        std::size_t added = 0;
        if (rec.contains("placement_change")) {
          const auto now = replicas(rec["placement_change"]["placement"][l].get<std::string>());
          for (const auto& r : now) added += held[l].count(r) ? 0 : 1;
          held[l] = now;
        }
        CHECK(bytes == 50304.0 * added);
        moved += static_cast<int>(added);
      }
    CHECK(moved > 0);
    // Prediction error: the monitor's estimate before each step (exponential smoothing 0.5 of
    // the counts seen so far, recomputed here) against the step's counts, |diff| / tokens.
    std::vector<std::vector<double>> estimate;
    for (const auto& rec : b) {
      const auto counts = rec["tokens_per_expert"].get<std::vector<std::vector<double>>>();
      if (estimate.empty()) {
        CHECK_FALSE(rec.contains("prediction_error"));
        estimate = counts;
        continue;
      }
      for (std::size_t l = 0; l < counts.size(); ++l) {
        double off = 0, tokens = 0;
        for (std::size_t e = 0; e < counts[l].size(); ++e) {
          off += std::abs(estimate[l][e] - counts[l][e]), tokens += counts[l][e];
          estimate[l][e] = 0.5 * estimate[l][e] + 0.5 * counts[l][e];
        }
        CHECK(rec["prediction_error"][l].get<double>() == Approx(off / tokens).epsilon(1e-12));
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("the checkpoint index records model.arch and its shape keys, resuming another model names the key", "[moe]") {
  const Schema schema = moe_train_schema();
  const std::string dir = scratch("archresume");
  const std::vector<std::string> bert = {"--train.iterations=2", "--model.arch=bert", "--output.checkpoint_dir=" + dir};
  run(schema, bert);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) {
    const Json index = Json::parse(read_file(dir + "/step_00000002/index.json"));
    REQUIRE(index["model"]["model.arch"] == "bert");
    REQUIRE(index["model"]["model.d_model"] == 32);  // the tiny test config's
    REQUIRE(index["model"]["model.seq_len"] == 32);
    REQUIRE(index["model"]["moe.num_experts"] == 4);
    REQUIRE_FALSE(index["model"].contains("swin.window"));  // only the written family's shape keys
    REQUIRE_FALSE(index["model"].contains("model.d_ff"));   // no dense FFN at moe_every = 1
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto resumed_with = [&](const std::string& flag) {
    std::vector<std::string> flags = {"--train.iterations=4", "--output.checkpoint_dir=" + dir, "--output.resume=true"};
    flags.push_back(flag);
    return flags;
  };
  // GPT and BERT share every tensor name; before the index recorded model.arch this failed on
  // the embedding's size (257 vs 256 rows), naming a tensor instead of the key.
  REQUIRE_THROWS_WITH(run(schema, resumed_with("--model.arch=gpt")),
                      Catch::Contains("written with model.arch=\"bert\" but this run has model.arch=\"gpt\""));
  REQUIRE_THROWS_WITH(run(schema, resumed_with("--model.arch=swin")),
                      Catch::Contains("written with model.arch=\"bert\" but this run has model.arch=\"swin\""));
  REQUIRE_THROWS_WITH(run(schema, {"--train.iterations=4", "--model.arch=bert", "--model.seq_len=16",
                                   "--output.checkpoint_dir=" + dir, "--output.resume=true"}),
                      Catch::Contains("written with model.seq_len=32 but this run has model.seq_len=16"));
  // The same model resumes.
  const Json resumed = run(schema, resumed_with("--model.arch=bert"));
  REQUIRE(std::isfinite(resumed["final_loss"].get<double>()));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}
