// train.device resolved per rank (lib/moe/session.cpp): what each choice gives for a rank that sees
// no GPU or one, per model.arch and moe.policy, and the errors naming the keys at fault. The GPU count is a
// parameter, so every branch runs here without a GPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "apps/moe_train_options.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/moe_top1.hpp"
#include "lib/moe/session.hpp"

using namespace skew;

namespace {
Device resolve(const std::string& device, const std::string& arch, int visible_gpus,
               const std::string& policy = "static") {
  static const Schema schema = moe_train_schema();  // a Config refers to its schema
  const Config c = Config::parse_ini_text(
      schema, "", "test", {"--train.device=" + device, "--model.arch=" + arch, "--moe.policy=" + policy});
  return moe::train_device(moe_train_options(c), visible_gpus);
}
}  // namespace

TEST_CASE("train.device=cpu runs on the host whatever the GPUs", "[moe][device]") {
  for (const char* arch : {"gpt", "bert", "swin"})
    for (int gpus : {0, 1, 8}) CHECK(resolve("cpu", arch, gpus) == Device::Host);
}

TEST_CASE("train.device=auto picks cuda for gpt and bert only where the build has CUDA and a GPU is visible",
          "[moe][device]") {
  for (const char* arch : {"gpt", "bert"}) {
    INFO(arch);
    CHECK(resolve("auto", arch, 0) == Device::Host);
    CHECK(resolve("auto", arch, 2) == (cuda_built() ? Device::Cuda : Device::Host));
  }
  CHECK(resolve("auto", "swin", 2) == Device::Host);
}

TEST_CASE("train.device=auto picks cuda for gpt under every moe.policy", "[moe][device]") {
  for (const char* policy : {"static", "deepspeed", "fastermoe", "flexmoe"}) {
    INFO(policy);
    CHECK(resolve("auto", "gpt", 2, policy) == (cuda_built() ? Device::Cuda : Device::Host));
    CHECK(resolve("auto", "gpt", 0, policy) == Device::Host);
    CHECK(resolve("cpu", "gpt", 2, policy) == Device::Host);
  }
}

TEST_CASE("train.device=cuda where it cannot run is an error naming the keys", "[moe][device]") {
  CHECK_THROWS_WITH(resolve("cuda", "gpt", 0),
                    Catch::Contains(cuda_built() ? "train.device=cuda, but no CUDA device is visible"
                                                 : "train.device=cuda, but this build has no CUDA"));
  if (!cuda_built()) return;  // the build's error comes first; the rest needs a CUDA build
  CHECK(resolve("cuda", "gpt", 1) == Device::Cuda);
  CHECK(resolve("cuda", "bert", 1) == Device::Cuda);
  CHECK_THROWS_WITH(resolve("cuda", "swin", 1), Catch::Contains("train.device=cuda with model.arch=swin") &&
                                                    Catch::Contains("runs on the CPU only"));
  for (const char* policy : {"deepspeed", "fastermoe", "flexmoe"}) {
    INFO(policy);
    CHECK(resolve("cuda", "gpt", 1, policy) == Device::Cuda);
  }
}

// The step's top-1 count, which a GPU step computes where the logits are: the CPU twin (the row
// body the CUDA kernel runs per thread) against std::max_element, on random logits with planted
// ties (the first of equal largest values is the choice) and targets that hit about half the rows.
TEST_CASE("the top-1 count's CPU twin equals a max_element count, ties to the first", "[moe][device]") {
  const int rows = 37, v = 29;
  Rng rng(11, 3);
  std::vector<float> logits(static_cast<std::size_t>(rows) * v);
  for (auto& x : logits) x = static_cast<float>(rng.normal());
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  std::int64_t want = 0;
  for (int r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<std::size_t>(r) * v;
    if (r % 3 == 0) row[5] = row[17] = 9.0f;  // a tie: column 5 is the choice, 17 is not
    const auto top = static_cast<std::int32_t>(std::max_element(row, row + v) - row);
    targets[static_cast<std::size_t>(r)] = r % 2 == 0 ? top : (r % 3 == 0 ? 17 : (top + 1) % v);
    want += targets[static_cast<std::size_t>(r)] == top ? 1 : 0;
  }
  REQUIRE(want > 0);
  REQUIRE(want < rows);
  CHECK(kernels::moe::top1_hits(Device::Host, rows, v, logits.data(), targets.data()) == want);
  const std::vector<double> wide(logits.begin(), logits.end());
  CHECK(kernels::moe::top1_hits(Device::Host, rows, v, wide.data(), targets.data()) == want);
  CHECK(kernels::moe::top1_hits(Device::Host, 0, v, logits.data(), targets.data()) == 0);
}
