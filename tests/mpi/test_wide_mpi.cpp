// Data parallel wide training on the CPU: every schema and model (flow LR routed and all hot)
// against one rank stepping through the same global batches (tests/mpi/wide_data_parallel.hpp),
// hashed 64-bit ids included, the exchange of touched rows at full 32-bit width, and the model
// rows a run reads (gathered over the ranks).
#include <algorithm>
#include <set>

#include "lib/wide/fit_data.hpp"
#include "tests/mpi/wide_data_parallel.hpp"
#include "tests/unit/error_message.hpp"

using namespace skew;
using namespace skew::wide;

TEST_CASE("allreduce data parallel equals one rank with the same global batch") {
  // Flow LR both ways: cold features routed to owners (no replica budget) and all hot.
  for (const auto& [schema, replica_budget] : {std::pair{"classical", 0}, {"flow", 0}, {"flow", 1 << 20}}) {
    for (const char* model_type : {"lr", "fm"}) {
      TrainOptions o;
      o.schema = schema_from_name(schema);
      // Several ranks sum a batch gradient; the one-rank run to match is the batch one too.
      o.classical_sync = ClassicalSync::Atomic;
      o.flow.replica_budget_bytes = replica_budget;
      o.optimizer.kind = OptimizerKind::AdaGrad;
      o.optimizer.lr = 0.1f;
      o.optimizer.l2 = 1e-4f;
      INFO(schema << " " << model_type << " replica budget " << replica_budget);
      testing::check_data_parallel_equals_one_rank(kernels::wide_kind_from_name(model_type), o, o);
    }
  }
}

TEST_CASE("hashed 64-bit ids: data parallel over rows up to the top of a 2^20-row model equals one rank") {
  // Ids hashed into 2^20 rows (the model sizes a test can hold; rows above 2^31 are checked on
  // the exchange itself below). The touched rows reach the top of the range.
  const auto spec = parse_synthetic_spec("synthetic:criteo?features=5000&alpha=1.2&seed=4");
  const SparseDataset sample = generate_synthetic(spec, 0, 768);
  std::uint32_t top = 0;
  for (std::uint32_t i : sample.index) top = std::max(top, hashed_feature_row(i, 20));
  CHECK(top > (1u << 20) - 1024);
  for (const char* schema : {"classical", "flow"})
    for (const char* model_type : {"lr", "fm"}) {
      TrainOptions o;
      o.schema = schema_from_name(schema);
      o.classical_sync = ClassicalSync::Atomic;
      o.optimizer.kind = OptimizerKind::AdaGrad;
      o.optimizer.lr = 0.1f;
      o.optimizer.l2 = 1e-4f;
      INFO(schema << " " << model_type << " hashed into 2^20 rows");
      testing::check_data_parallel_equals_one_rank(kernels::wide_kind_from_name(model_type), o, o, 1e-4, 20);
    }
}

TEST_CASE(
    "the ranks' union of touched rows carries rows at and above 2^31 unchanged, and refuses rows past the model") {
  auto world = std::make_shared<comm::MpiProcessGroup>(MPI_COMM_WORLD);
  const int P = world->size();
  // Rank q's rows; the union is written out over every rank's list here, independently of the
  // exchange (a sorted set).
  const auto rows_of = [](int q) {
    std::vector<std::uint32_t> v{7, std::uint32_t(q), 0x7FFFFFFFu + std::uint32_t(q),
                                 0x80000000u + 5u * std::uint32_t(q), 0xFFFFFFFEu - std::uint32_t(q)};
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  std::set<std::uint32_t> expect;
  for (int q = 0; q < P; ++q)
    for (std::uint32_t row : rows_of(q)) expect.insert(row);
  const std::int64_t rows_in_model = std::int64_t(1) << 32;
  const std::vector<std::uint32_t> got = union_of_rows(*world, rows_of(world->rank()), rows_in_model);
  CHECK(got == std::vector<std::uint32_t>(expect.begin(), expect.end()));
  CHECK(got.back() == 0xFFFFFFFEu);
  // Every rank sees the same union, so every rank refuses it together (no rank left waiting).
  CHECK_THAT(skew::test::error_of([&] { union_of_rows(*world, rows_of(world->rank()), std::int64_t(1) << 31); }),
             Catch::Contains("outside the model's 2147483648 rows"));
}

TEST_CASE("the model rows a run reads: every rank's training rows and this rank's validation rows") {
  auto world = std::make_shared<comm::MpiProcessGroup>(MPI_COMM_WORLD);
  const int P = world->size(), r = world->rank();
  const auto spec = parse_synthetic_spec("synthetic:criteo?features=5000&alpha=1.2&seed=6");
  Data d;
  d.shape = kernels::WideShape{kernels::WideKind::FFM, 5000, 39, 4};
  d.train = generate_synthetic(spec, 200 * r, 200 * (r + 1));
  d.valid = generate_synthetic(spec, 100000 + 50 * r, 100000 + 50 * (r + 1));
  d.has_valid = true;
  std::set<std::uint32_t> want;
  for (int q = 0; q < P; ++q) {
    const SparseDataset train = generate_synthetic(spec, 200 * q, 200 * (q + 1));
    want.insert(train.index.begin(), train.index.end());
  }
  want.insert(d.valid.index.begin(), d.valid.index.end());
  const std::vector<std::uint8_t> read = model_rows_read(d, *world, -1);
  REQUIRE(read.size() == 5000);
  std::int64_t wrong = 0;
  for (std::uint32_t f = 0; f < 5000; ++f) wrong += (read[f] != 0) != (want.count(f) > 0);
  CHECK(wrong == 0);
  CHECK(std::int64_t(want.size()) < 5000);  // some rows are left for later

  // Renumbered (as load_data does): the training rows come from the counts over all ranks.
  std::vector<std::int64_t> counts = feature_counts(d.train, 5000);
  world->allreduce(comm::view(counts), comm::ReduceOp::Sum);
  d.order = FeatureOrder::by_frequency(counts);
  d.order.apply(d.train);
  d.order.apply(d.valid);
  const std::vector<std::uint8_t> renumbered =
      model_rows_read(d, *world, std::count_if(counts.begin(), counts.end(), [](std::int64_t n) { return n > 0; }));
  REQUIRE(renumbered.size() == 5000);
  std::set<std::uint32_t> want_renumbered;
  for (const std::uint32_t f : want) want_renumbered.insert(d.order.new_of_old[f]);
  wrong = 0;
  for (std::uint32_t f = 0; f < 5000; ++f) wrong += (renumbered[f] != 0) != (want_renumbered.count(f) > 0);
  CHECK(wrong == 0);
  d.shape = kernels::WideShape{kernels::WideKind::LR, 5000, 39, 0};
  CHECK(model_rows_read(d, *world, -1).empty());  // LR has no latent rows to defer
}
