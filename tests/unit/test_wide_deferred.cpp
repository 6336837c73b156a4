// A wide model created with only the rows its data reads (WideModel::create's rows_read): those
// rows equal the eager model's bit for bit, the others stay zero and their pages not resident;
// writing the rows a dataset reads, or all of them, gives the eager model bit for bit; and a
// trainer on such a model trains, scores and hands out parameters exactly as on the eager one.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <vector>

#include "lib/wide/model.hpp"
#include "lib/wide/trainer.hpp"

using namespace skew;
using namespace skew::wide;
using kernels::WideKind;
using kernels::WideShape;

namespace {

// Bytes of [p, p + bytes) in memory (mincore, page by page).
std::size_t resident_bytes(const void* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::size_t pages = (reinterpret_cast<std::uintptr_t>(p) + bytes - begin + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  REQUIRE(mincore(reinterpret_cast<void*>(begin), pages * page, in_core.data()) == 0);
  return page * std::size_t(std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; }));
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

bool row_equal(const WideModel& a, const WideModel& b, std::int64_t f) {
  const std::size_t len = std::size_t(a.shape.row_len());
  return std::memcmp(a.params.data() + 1 + std::size_t(f) * len, b.params.data() + 1 + std::size_t(f) * len,
                     len * sizeof(float)) == 0;
}

bool row_zero(const WideModel& m, std::int64_t f) {
  const float* row = m.params.data() + 1 + std::size_t(f) * std::size_t(m.shape.row_len());
  for (int j = 0; j < m.shape.row_len(); ++j)
    if (row[j] != 0.0f) return false;
  return true;
}

std::vector<std::uint8_t> rows_of(const SparseDataset& data, std::int64_t num_features) {
  std::vector<std::uint8_t> read(std::size_t(num_features), 0);
  for (const std::uint32_t f : data.index) read[f] = 1;
  return read;
}

SparseDataset criteo_rows(std::int64_t begin, std::int64_t end) {
  return generate_synthetic(parse_synthetic_spec("synthetic:criteo?features=3000&alpha=1.2&seed=4"), begin, end);
}

}  // namespace

TEST_CASE("deferred rows: the rows read equal the eager model's, the rest wait as zero pages until written") {
  // 20011 features of 7 fields x k 5 (latent 35, not a multiple of four): several creation
  // blocks, the last partial. Rows read: 0..99 and every 13th.
  const WideShape shape{WideKind::FFM, 20011, 7, 5};
  std::vector<std::uint8_t> read(std::size_t(shape.num_features), 0);
  for (std::int64_t f = 0; f < shape.num_features; ++f) read[std::size_t(f)] = f < 100 || f % 13 == 0;
  const std::int64_t unread = std::int64_t(std::count(read.begin(), read.end(), std::uint8_t(0)));
  const WideModel eager = WideModel::create(shape, 9, 0.05f, 1);
  WideModel lazy = WideModel::create(shape, 9, 0.05f, 3, &read);
  REQUIRE(lazy.params.size() == eager.params.size());
  CHECK(lazy.deferred.count == unread);
  for (std::int64_t f = 0; f < shape.num_features; ++f) {
    if (read[std::size_t(f)])
      REQUIRE(row_equal(lazy, eager, f));
    else
      REQUIRE(row_zero(lazy, f));
  }

  // A dataset reading some pending rows (and some written ones): exactly its pending rows are
  // written, with the eager values; the other pending rows stay zero.
  SparseDataset data;
  data.num_features = shape.num_features;
  data.num_fields = shape.num_fields;
  const std::vector<std::uint32_t> ids{5, 114, 127, 127, 1000, 20010, 13, 26};  // 5, 13, 26: already read
  const std::vector<std::uint16_t> fields(ids.size(), 2);
  const std::vector<float> values(ids.size(), 1.0f);
  data.append_row(ids.data(), fields.data(), values.data(), 4, 1.0f);
  data.append_row(ids.data() + 4, fields.data() + 4, values.data() + 4, 4, 0.0f);
  lazy.write_rows_of(data, 2);
  CHECK(lazy.deferred.count == unread - 4);  // 114, 127, 1000, 20010
  for (const std::int64_t f : {114, 127, 1000, 20010}) CHECK(row_equal(lazy, eager, f));
  for (const std::int64_t f : {101, 998, 1002, 20009}) CHECK(row_zero(lazy, f));

  CHECK_THROWS_WITH(lazy.save("/tmp/skew_never_written.safetensors"), Catch::Contains("deferred latent rows"));
  lazy.materialise(2);
  CHECK(lazy.deferred.count == 0);
  CHECK(lazy.deferred.pending.empty());
  CHECK(std::memcmp(lazy.params.data(), eager.params.data(), eager.params.size() * sizeof(float)) == 0);
}

TEST_CASE("deferred rows cost resident memory only where rows are read") {
  // 100k FFM rows of 39 fields x k 4: 62.8 MB when written eagerly; 300 rows read, 331 rows
  // (208 KB) apart: at most two 4 KiB pages each (a 2 MiB page around each would hold them all).
  const WideShape shape{WideKind::FFM, 100000, 39, 4};
  std::vector<std::uint8_t> read(std::size_t(shape.num_features), 0);
  for (std::int64_t f = 0; f < 300; ++f) read[std::size_t(f * 331)] = 1;
  const long before = minor_faults();
  const WideModel lazy = WideModel::create(shape, 3, 0.01f, 1, &read);
  CHECK(minor_faults() - before < 1000);
  CHECK(lazy.deferred.count == shape.num_features - 300);
  CHECK(resident_bytes(lazy.params.data(), lazy.params.size() * sizeof(float)) <= 600 * 4096);
}

TEST_CASE("a trainer on a deferred model trains, scores and hands out parameters as on the eager model, bit for bit") {
  // Validation rows the training rows do not read: evaluate() must write them first.
  const SparseDataset train = criteo_rows(0, 300), valid = criteo_rows(300, 500);
  const std::vector<std::uint8_t> read = rows_of(train, 3000), valid_read = rows_of(valid, 3000);
  std::int64_t valid_only = 0;
  for (std::size_t f = 0; f < read.size(); ++f) valid_only += valid_read[f] && !read[f];
  REQUIRE(valid_only > 0);
  for (const auto schema : {TrainSchema::Flow, TrainSchema::Classical}) {
    for (const WideKind kind : {WideKind::FM, WideKind::FFM}) {
      const WideShape shape{kind, 3000, 39, 4};
      TrainOptions options;
      options.schema = schema;
      options.threads = schema == TrainSchema::Flow ? 2 : 1;  // Hogwild is deterministic at one thread
      options.optimizer.lr = 0.1f;
      WideTrainer eager(WideModel::create(shape, 21, 0.1f, 1), options);
      WideTrainer lazy(WideModel::create(shape, 21, 0.1f, 2, &read), options);
      for (std::int64_t begin = 0; begin < train.rows(); begin += 64) {
        const std::int64_t end = std::min(train.rows(), begin + 64);
        const StepResult a = eager.step(train, begin, end), b = lazy.step(train, begin, end);
        REQUIRE(a.loss == b.loss);
      }
      const Evaluation ea = eager.evaluate(valid), eb = lazy.evaluate(valid);
      CHECK(ea.logloss == eb.logloss);
      CHECK(ea.auc == eb.auc);
      CHECK(eager.predict(valid) == lazy.predict(valid));
      const WideParams& pa = eager.parameters();
      const WideParams& pb = lazy.parameters();
      CHECK(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)) == 0);
      CHECK(lazy.model().deferred.count == 0);
    }
  }
}

TEST_CASE("set_parameters replaces a deferred model's values without writing its pending rows first") {
  const WideShape shape{WideKind::FM, 500, 1, 3};
  std::vector<std::uint8_t> read(500, 0);
  read[7] = 1;
  WideTrainer trainer(WideModel::create(shape, 2, 0.1f, 1, &read), TrainOptions{});
  std::vector<float> values(shape.num_params());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * float(i % 97) - 0.03f;
  trainer.set_parameters(values);
  CHECK(copy_to_vector(trainer.parameters()) == values);
  CHECK_THROWS_WITH(trainer.set_parameters(std::vector<float>(3)), Catch::Contains("3 values for"));
}
