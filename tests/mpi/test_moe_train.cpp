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
