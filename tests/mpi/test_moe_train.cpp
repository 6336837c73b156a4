// moe_train's loop on 2 ranks: a short training falls below the unigram entropy of its data.
#include <catch2/catch.hpp>

#include "tests/mpi/test_moe_util.hpp"

using namespace skew;
using namespace skew_moe_test;

TEST_CASE("a short training run falls clearly below the unigram entropy", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const Json s = run(schema, {});
  INFO(s.dump());
  REQUIRE(s["final_val_loss"].get<double>() < s["unigram_entropy"].get<double>() - 0.4);
  REQUIRE(s["dropped"].get<std::int64_t>() == 0);
}

TEST_CASE("bf16 mixed-precision training learns as well as fp32", "[moe]") {
  const Schema schema = moe::moe_train_schema();
  const Json fp32 = run(schema, {});
  const Json bf16 = run(schema, {"--train.precision=bf16"});
  INFO(fp32.dump() << "\n" << bf16.dump());
  REQUIRE(bf16["final_val_loss"].get<double>() < bf16["unigram_entropy"].get<double>() - 0.4);
  // With fp32 master weights the bf16 run ends within a few hundredths of a nat of fp32's, and it
  // did compute differently.
  REQUIRE(std::abs(bf16["final_val_loss"].get<double>() - fp32["final_val_loss"].get<double>()) < 0.05);
  REQUIRE(bf16["final_val_loss"].get<double>() != fp32["final_val_loss"].get<double>());
}
