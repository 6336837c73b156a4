// preduce_train's memory estimate (lib/preduce/memory_estimate.hpp, issue 38): the parameter
// count equals the model each task makes, for the MLP (generated clusters and MNIST-shaped CSV)
// and the wide models; the whole estimate is within a factor of 2 of the heap a task and its
// simulated workers hold after a gradient each (glibc's mallinfo2: bytes in use).

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "lib/preduce/memory_estimate.hpp"
#include "lib/preduce/task.hpp"
#include "lib/preduce/worker.hpp"
#include "tests/unit/heap_usage.hpp"

using namespace skew;
using namespace skew::preduce;

namespace {
// `rows` lines of "label,784 pixels", MNIST's shape.
void write_mnist_csv(const std::string& path, int rows) {
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    out << r % 10;
    for (int p = 0; p < 784; ++p) out << ',' << ((p + r) % 7) / 7.0;
    out << '\n';
  }
}
}  // namespace

TEST_CASE("preduce memory estimate: parameters equal the model each task makes", "[preduce][memory]") {
  TrainOptions opt;
  opt.rows = 200, opt.test_rows = 50, opt.dim = 13, opt.classes = 5;
  SECTION("MLP on clusters, three hidden layers") {
    opt.hidden = {17, 9, 4};
    CHECK(model_params(opt) == std::int64_t(make_task(opt, 2)->init().size()));
  }
  SECTION("logistic regression (no hidden layer)") {
    opt.hidden = {};
    CHECK(model_params(opt) == std::int64_t(make_task(opt, 2)->init().size()));
  }
  SECTION("MLP on MNIST's CSV") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "skew_preduce_memory_mnist";
    std::filesystem::create_directories(dir);
    write_mnist_csv((dir / "train.csv").string(), 20);
    write_mnist_csv((dir / "test.csv").string(), 10);
    opt.source = "mnist", opt.mnist_dir = dir.string(), opt.hidden = {16};
    CHECK(model_params(opt) == std::int64_t(make_task(opt, 2)->init().size()));
    std::filesystem::remove_all(dir);
  }
  SECTION("LR and FM on synthetic CTR data") {
    opt.source = "synthetic_ctr", opt.ctr_features = 3000, opt.fm_k = 6;
    for (const char* kind : {"lr", "fm"}) {
      opt.model_kind = kind;
      CAPTURE(kind);
      CHECK(model_params(opt) == std::int64_t(make_task(opt, 2)->init().size()));
    }
  }
}

TEST_CASE("preduce memory estimate: the total is within a factor of 2 of a simulated run's heap", "[preduce][memory]") {
  TrainOptions opt;
  opt.simulate = true;
  opt.rows = 20000, opt.test_rows = 2000, opt.dim = 40, opt.classes = 6, opt.hidden = {256, 128};
  const int workers = 16;
  const double before = skew::test::heap_in_use();
  double held = 0;
  {
    std::unique_ptr<Task> task = make_task(opt, workers);
    std::vector<Worker> pool;
    pool.reserve(workers);
    for (int w = 0; w < workers; ++w) {
      pool.emplace_back(opt, *task, w, workers);
      pool.back().gradient_at(pool.back().params());
    }
    held = skew::test::heap_in_use() - before;
  }
  double estimate = 0;
  for (const MemoryPart& p : memory_parts(opt, workers)) estimate += p.bytes;
  skew::test::check_estimate_within_factor_two(held, estimate);
}
