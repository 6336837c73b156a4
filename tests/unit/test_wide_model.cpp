// Models against a float64 reference: the reference's gradients against finite differences,
// then both schemas (classical, flow; 1 and 2 threads) against the reference on one batch.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"
#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/trainer.hpp"
#include "tests/unit/error_message.hpp"
#include "tests/unit/wide_reference.hpp"

using namespace skew;
using namespace skew::wide;
using kernels::WideKind;
using kernels::WideShape;

using namespace skew::wide::reference;

TEST_CASE("float64 reference gradients match finite differences") {
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    Setup s = make_setup(kind, 6);
    std::vector<double> p(s.model.params.begin(), s.model.params.end());
    const auto g = ref_grad(s.shape, s.data, p);
    // Probe the bias and every coordinate of the first sample's first two features.
    std::vector<std::size_t> probes{0};
    for (int a = 0; a < 2; ++a)
      for (int j = 0; j < s.shape.row_len(); ++j)
        probes.push_back(std::size_t(1 + s.data.index[std::size_t(a)] * s.shape.row_len() + j));
    for (std::size_t c : probes) {
      const double h = 1e-6, keep = p[c];
      p[c] = keep + h;
      const double up = ref_loss(s.shape, s.data, p);
      p[c] = keep - h;
      const double down = ref_loss(s.shape, s.data, p);
      p[c] = keep;
      INFO(kernels::wide_kind_name(kind) << " coordinate " << c);
      CHECK((up - down) / (2 * h) == Approx(g[c]).margin(1e-7).epsilon(1e-5));
    }
  }
}

TEST_CASE("classical == flow == float64 reference on one batch (logits and gradients)") {
  // FFM four times: flow FFM compiles its pair loops in blocks of four floats for k = 4, 8 and 16
  // (kernels/cpu/wide_flow_ffm.cpp) and runs the shared per-entry bodies for other k.
  for (const auto& [kind, k] : {std::pair{WideKind::LR, 0},
                                {WideKind::FM, 4},
                                {WideKind::FFM, 4},
                                {WideKind::FFM, 8},
                                {WideKind::FFM, 16},
                                {WideKind::FFM, 3}}) {
    Setup s = make_setup(kind, 300, k);
    const BatchReference ref = batch_reference(s);
    REQUIRE(ref.grad_scale > 0.1);
    // Flow LR either routes cold features to owners (no replica budget) or, when every feature's
    // per-thread replica fits the budget, caches them all.
    for (const auto& [schema, replica_budget] : {std::pair{"classical", 0}, {"flow", 0}, {"flow", 1 << 20}}) {
      for (int threads : {1, 2}) {
        TrainOptions o;
        o.schema = schema_from_name(schema);
        o.threads = threads;
        o.flow.tile_samples = 32;
        o.flow.hot_features = 64;
        o.flow.replica_budget_bytes = replica_budget;
        WideTrainer t(s.model, o);
        std::vector<float> g, logits;
        t.gradient(s.data, 0, s.data.rows(), g, logits);
        INFO(kernels::wide_kind_name(kind)
             << " k=" << k << " " << schema << " threads=" << threads << " budget=" << replica_budget);
        REQUIRE(logits.size() == ref.logits.size());
        const BatchError err = batch_error(ref, logits, g);
        CHECK(err.logit < 1e-4);
        CHECK(err.grad < 1e-4);
        if (o.schema == TrainSchema::Flow && kind != WideKind::FFM) {
          const kernels::WideFlowStats& stats = t.flow()->last_stats();
          CHECK(stats.hot_columns > 0);
          const bool all_hot = kind == WideKind::LR && replica_budget > 0;
          CHECK((stats.hot_columns == stats.columns) == all_hot);
        }
      }
    }
  }
}

// Flow LR on make_setup's 2000 features: tiles of 4, 16 hot features, and a replica budget that
// holds every feature's replicas at 1-3 threads (so a dense batch caches them all).
static TrainOptions dense_batch_options(int threads) {
  TrainOptions o;
  o.schema = TrainSchema::Flow;
  o.threads = threads;
  o.flow.tile_samples = 4;
  o.flow.hot_features = 16;
  o.flow.replica_budget_bytes = 1 << 20;
  return o;
}

TEST_CASE("flow LR caches every feature only in a batch dense in them, and is right either way") {
  // 2000 features: 300 rows (11700 entries) are dense, 6 rows (234 < 2000 / 8) sparse; the
  // budget holds every feature's replicas at 1 and 2 threads.
  for (const std::int64_t rows : {300, 6}) {
    Setup s = make_setup(WideKind::LR, rows);
    const BatchReference ref = batch_reference(s);
    const bool dense = s.data.batch(0, rows).nnz() * kernels::WideFlow::kDenseBatchRatio >= 2000;
    CHECK(dense == (rows == 300));
    for (int threads : {1, 2}) {
      WideTrainer t(s.model, dense_batch_options(threads));
      std::vector<float> g, logits;
      t.gradient(s.data, 0, rows, g, logits);
      INFO("rows=" << rows << " threads=" << threads);
      const BatchError err = batch_error(ref, logits, g);
      CHECK(err.logit < 1e-4);
      CHECK(err.grad < 1e-4);
      const kernels::WideFlowStats& stats = t.flow()->last_stats();
      CHECK((stats.hot_columns == stats.columns) == dense);
      CHECK(stats.hot_columns > 0);
    }
  }
}

TEST_CASE("flow LR: dense and sparse batches in turn through one trainer, at 1-3 threads, each right") {
  // Each thread clears its own replica at the start of the next step, over the words the last
  // step used: a dense batch (every feature hot) leaves all of them dirty, and a 6-row batch has
  // 2 tiles, so at 3 threads the third replica is cleared by a thread with no tile to run.
  const Setup dense = make_setup(WideKind::LR, 300), sparse = make_setup(WideKind::LR, 6);
  REQUIRE(std::equal(dense.model.params.begin(), dense.model.params.end(), sparse.model.params.begin()));
  const BatchReference dense_ref = batch_reference(dense), sparse_ref = batch_reference(sparse);
  for (int threads : {1, 2, 3}) {
    WideTrainer t(dense.model, dense_batch_options(threads));
    for (int round = 0; round < 2; ++round)
      for (const auto& [s, ref] : {std::pair{&dense, &dense_ref}, {&sparse, &sparse_ref}}) {
        std::vector<float> g, logits;
        t.gradient(s->data, 0, s->data.rows(), g, logits);
        INFO("threads=" << threads << " round=" << round << " rows=" << s->data.rows());
        const BatchError err = batch_error(*ref, logits, g);
        CHECK(err.logit < 1e-4);
        CHECK(err.grad < 1e-4);
      }
  }
}

TEST_CASE("radix sort orders pairs stably") {
  std::vector<std::uint32_t> keys{5000, 3, 70000, 3, 0, 5000, 1 << 21}, vals{0, 1, 2, 3, 4, 5, 6};
  std::vector<std::uint32_t> kt(keys.size()), vt(keys.size()), counts(1 << 11);
  kernels::wide_radix_sort_pairs(keys.data(), vals.data(), keys.size(), 22, kt.data(), vt.data(), counts.data());
  CHECK(keys == std::vector<std::uint32_t>{0, 3, 3, 5000, 5000, 70000, 1 << 21});
  CHECK(vals == std::vector<std::uint32_t>{4, 1, 3, 0, 5, 2, 6});
}

TEST_CASE("AUC and logloss closed forms") {
  CHECK(roc_auc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}) == Approx(0.75));
  CHECK(roc_auc({0.5f, 0.5f}, {0, 1}) == Approx(0.5));
  const float z[2] = {0.0f, 2.0f}, y[2] = {1.0f, 0.0f};
  CHECK(logloss_sum(z, y, 2) == Approx(std::log(2.0) + std::log1p(std::exp(2.0))));
}

TEST_CASE("a logloss term (float math) is the float64 softplus to a few 1e-7 over logits from -120 to 120") {
  double worst = 0;
  for (int step = -24000; step <= 24000; ++step) {
    const float logit = float(step) * 0.005f;
    for (const float label : {0.0f, 1.0f}) {
      const double x = label > 0.5f ? -double(logit) : double(logit);
      const double expect = std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
      worst = std::max(worst, std::fabs(kernels::wide_logloss_term(logit, label) - expect) / std::max(expect, 1e-30));
    }
  }
  CHECK(worst < 1e-6);
  CHECK(worst > 0);  // float math: not the double formula itself
  CHECK(kernels::wide_logloss_term(200.0f, 0.0f) == 200.0);
  CHECK(kernels::wide_logloss_term(200.0f, 1.0f) == 0.0);
  CHECK(std::isnan(kernels::wide_logloss_term(std::nanf(""), 1.0f)));
  CHECK(std::isinf(kernels::wide_logloss_term(-std::numeric_limits<float>::infinity(), 1.0f)));
}

// The AUC as the probability a positive outscores a negative (ties count half), over all pairs.
static double pairwise_auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  double wins = 0, pairs = 0;
  for (std::size_t p = 0; p < scores.size(); ++p)
    for (std::size_t n = 0; n < scores.size(); ++n)
      if (labels[p] > 0.5f && labels[n] < 0.5f) {
        pairs += 1;
        wins += scores[p] > scores[n] ? 1.0 : scores[p] == scores[n] ? 0.5 : 0.0;
      }
  return wins / pairs;
}

TEST_CASE("AUC with infinite scores matches the pairwise count, with a NaN score it is NaN, and returns") {
  Rng rng(7, 0);
  std::vector<float> scores(300), labels(300);
  for (std::size_t i = 0; i < scores.size(); ++i) {
    // Coarse values give many ties; a tenth are +-inf, as from a model that overflowed.
    scores[i] = float(std::floor(rng.normal() * 4.0f)) / 4.0f;
    if (i % 10 == 3) scores[i] = (i % 20 == 3 ? 1.0f : -1.0f) * std::numeric_limits<float>::infinity();
    labels[i] = rng.normal() + 0.5f * (std::isinf(scores[i]) ? 0.0f : scores[i]) > 0 ? 1.0f : 0.0f;
  }
  CHECK(roc_auc(scores, labels) == Approx(pairwise_auc(scores, labels)).epsilon(1e-12));
  // roc_auc once spun forever on a NaN (its tie loop never advanced): it must return NaN.
  for (std::size_t at : {std::size_t(0), std::size_t(150), std::size_t(299)}) {
    std::vector<float> diverged = scores;
    diverged[at] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(roc_auc(diverged, labels)));
  }
  CHECK(std::isnan(
      roc_auc(std::vector<float>(50, std::nanf("")), std::vector<float>(labels.begin(), labels.begin() + 50))));
}

TEST_CASE("optimizers lower the training loss, FTRL starts from the given weights") {
  for (const char* opt : {"sgd", "adagrad", "ftrl"}) {
    Setup s = make_setup(WideKind::FM, 512);
    TrainOptions o;
    o.optimizer.kind = optimizer_from_name(opt);
    o.optimizer.lr = 0.1f;
    o.optimizer.l2 = 1e-4f;
    const std::vector<float> start = copy_to_vector(s.model.params);
    WideTrainer t(s.model, o);
    const double before = t.evaluate(s.data).logloss;
    for (int epoch = 0; epoch < 5; ++epoch)
      for (std::int64_t b = 0; b < 512; b += 64) t.step(s.data, b, b + 64);
    INFO(opt);
    CHECK(t.evaluate(s.data).logloss < before - 0.02);
    // A feature no batch touched keeps its exact starting row.
    const std::size_t last = 1 + 1999 * std::size_t(s.shape.row_len());
    CHECK(t.parameters()[last + 1] == start[last + 1]);
  }
}

// Flow LR hands the optimizer feature rows instead of a dense gradient: the training run must
// be the classical one, touched set included (lazy L2 leaves untouched rows alone).
TEST_CASE("flow LR training (feature-row gradient) follows classical for every optimizer") {
  for (const char* opt : {"sgd", "adagrad", "ftrl"}) {
    for (int threads : {1, 3}) {
      Setup s = make_setup(WideKind::LR, 600);
      std::vector<std::vector<float>> params;  // classical, flow routed, flow all hot
      for (const auto& [schema, replica_budget] : {std::pair{"classical", 0}, {"flow", 0}, {"flow", 1 << 20}}) {
        TrainOptions o = lr_test_options(schema_from_name(schema), opt, threads);
        o.classical_sync = ClassicalSync::Atomic;  // the mini-batch run flow's must equal
        o.flow.replica_budget_bytes = replica_budget;
        WideTrainer t(s.model, o);
        for (int epoch = 0; epoch < 3; ++epoch)
          for (std::int64_t b = 0; b < 600; b += 100) t.step(s.data, b, b + 100);
        params.push_back(copy_to_vector(t.parameters()));
      }
      for (std::size_t flow = 1; flow < params.size(); ++flow) {
        INFO(opt << " threads=" << threads << (flow == 1 ? " routed" : " all hot"));
        double worst = 0, moved = 0;
        for (std::size_t c = 0; c < params[0].size(); ++c) {
          worst = std::max(worst, double(std::fabs(params[0][c] - params[flow][c])));
          moved = std::max(moved, double(std::fabs(params[0][c] - s.model.params[c])));
        }
        CHECK(moved > 0.01);
        CHECK(worst < 1e-5);
        const std::size_t last = 1 + 1999;  // feature 1999 is in no row of the 600
        CHECK(params[flow][last] == s.model.params[last]);
      }
    }
  }
}

TEST_CASE("train.device = cuda without a GPU fails with a message naming the key") {
  if (cuda_device_count() > 0) return;  // the CUDA tests cover the GPU path
  Setup s = make_setup(WideKind::LR, 10);
  TrainOptions o;
  o.device = TrainDevice::Cuda;
  REQUIRE_THROWS_WITH(WideTrainer(s.model, o), Catch::Contains("train.device = cuda"));
}

TEST_CASE("save / load round trip") {
  Setup s = make_setup(WideKind::FFM, 10);
  const auto path =
      (std::filesystem::temp_directory_path() / ("skew_wide_model_" + std::to_string(getpid()) + ".safetensors"))
          .string();
  s.model.save(path);
  const WideModel back = WideModel::load(path);
  CHECK(back.shape.kind == WideKind::FFM);
  CHECK(back.shape.num_fields == 39);
  CHECK(back.params == s.model.params);
  std::filesystem::remove(path);
}

TEST_CASE("a model file with a flipped bit or a NaN parameter is refused, naming the file and tensor") {
  Setup s = make_setup(WideKind::FM, 10);
  const auto path =
      (std::filesystem::temp_directory_path() / ("skew_wide_model_bad_" + std::to_string(getpid()) + ".safetensors"))
          .string();
  s.model.save(path);
  const std::string good = skew::read_file(path);
  // The params tensor is the file's only tensor and ends it: flip a bit of its last value.
  std::string flipped = good;
  flipped[flipped.size() - 2] ^= 0x01;
  skew::write_file_atomic(path, flipped);
  CHECK_THAT(skew::test::error_of([&] { WideModel::load(path); }),
             Catch::Contains(path) && Catch::Contains("params") && Catch::Contains("fails its checksum"));
  WideModel nan_model = s.model;  // saved with a matching checksum: only the finiteness check sees it
  nan_model.params[3] = std::numeric_limits<float>::quiet_NaN();
  nan_model.save(path);
  CHECK_THAT(skew::test::error_of([&] { WideModel::load(path); }),
             Catch::Contains(path) && Catch::Contains("params") && Catch::Contains("non-finite value at element 3"));
  skew::write_file_atomic(path, good);
  CHECK(WideModel::load(path).params == s.model.params);
  std::filesystem::remove(path);
}

TEST_CASE("renumbering maps back to original ids") {
  const FeatureOrder order = FeatureOrder::by_frequency({1, 5, 3});
  CHECK(order.new_of_old == std::vector<std::uint32_t>{2, 0, 1});
  const WideShape lr{WideKind::LR, 3, 1, 0};
  CHECK(copy_to_vector(order.to_original(lr, {9, 10, 11, 12})) == std::vector<float>{9, 12, 10, 11});
}

TEST_CASE("renumbering by frequency: descending counts, ties (zeros included) by id, as a stable sort of all ids") {
  // 5000 ids, three in four absent (count 0), the others drawn from 1..6 so that ties abound.
  std::vector<std::int64_t> counts(5000, 0);
  std::uint64_t x = 88172645463325252ull;
  for (auto& c : counts) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = x % 4 == 0 ? std::int64_t(1 + (x >> 8) % 6) : 0;
  }
  std::vector<std::uint32_t> rank(counts.size());
  std::iota(rank.begin(), rank.end(), 0u);
  std::sort(rank.begin(), rank.end(),
            [&](std::uint32_t a, std::uint32_t b) { return counts[a] != counts[b] ? counts[a] > counts[b] : a < b; });
  std::vector<std::uint32_t> want(counts.size());
  for (std::size_t r = 0; r < rank.size(); ++r) want[rank[r]] = std::uint32_t(r);
  CHECK(FeatureOrder::by_frequency(counts).new_of_old == want);
  // Counts beyond 32 bits take the comparison sort: the same rule.
  counts[7] = std::int64_t(1) << 33;
  counts[11] = (std::int64_t(1) << 33) + 1;
  counts[4000] = std::int64_t(1) << 33;
  const std::vector<std::uint32_t> big = FeatureOrder::by_frequency(counts).new_of_old;
  CHECK(big[11] == 0);
  CHECK(big[7] == 1);
  CHECK(big[4000] == 2);
  std::sort(rank.begin(), rank.end(),
            [&](std::uint32_t a, std::uint32_t b) { return counts[a] != counts[b] ? counts[a] > counts[b] : a < b; });
  for (std::size_t r = 0; r < rank.size(); ++r) want[rank[r]] = std::uint32_t(r);
  CHECK(big == want);
}

TEST_CASE(
    "renumbering from a frequency order: the places it lists, then every other id in id order, and names ids beyond it "
    "or listed twice") {
  // 130 ids (two words of bits and two ids of a third), the order listing ids at word edges.
  const std::vector<std::uint32_t> occurring = {129, 64, 0, 63, 65, 7};
  std::vector<std::uint32_t> want(130);
  std::uint32_t next = std::uint32_t(occurring.size());
  for (std::uint32_t id = 0; id < 130; ++id) {
    const auto at = std::find(occurring.begin(), occurring.end(), id);
    want[id] = at != occurring.end() ? std::uint32_t(at - occurring.begin()) : next++;
  }
  CHECK(FeatureOrder::from_occurring(occurring, 130).new_of_old == want);
  CHECK(FeatureOrder::from_occurring({}, 3).new_of_old == std::vector<std::uint32_t>{0, 1, 2});
  CHECK_THAT(skew::test::error_of([] {
               FeatureOrder::from_occurring({5, 129, 64, 129}, 130);
             }),
             Catch::Contains("id 129 at place 3 is listed twice"));
  CHECK_THAT(skew::test::error_of([] {
               FeatureOrder::from_occurring({5, 130}, 130);
             }),
             Catch::Contains("id 130 at place 1 is beyond the 130 features"));
}

TEST_CASE(
    "renumbering a dataset split over threads rewrites every id as one thread does, and names an id beyond the table") {
  // 3M nonzeros over 70001 ids (odd sizes): three threads take a part of at least 1M each.
  std::vector<std::int64_t> counts(70001, 0);
  SparseDataset d;
  std::uint64_t x = 2463534242ull;
  for (std::size_t e = 0; e < 3'000'001; ++e) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d.index.push_back(std::uint32_t(x % 50021));  // ids from 50021 on never occur
    ++counts[d.index.back()];
  }
  const FeatureOrder order = FeatureOrder::by_frequency(counts);
  std::vector<std::uint32_t> want(d.index.size());
  std::uint32_t want_end = 0;
  for (std::size_t e = 0; e < want.size(); ++e) {
    want[e] = order.new_of_old[d.index[e]];
    want_end = std::max(want_end, want[e] + 1);
  }
  for (const int threads : {1, 2, 3, 8}) {
    SparseDataset copy = d;
    INFO(threads << " threads");
    CHECK(order.apply(copy, threads) == want_end);
    CHECK(copy.index == want);
  }
  d.index[2'500'000] = 70001;  // in the last thread's part
  CHECK_THAT(skew::test::error_of([&] { order.apply(d, 3); }),
             Catch::Contains("feature 70001 beyond the renumbering table (70001)"));
}

// wide_bench's bound: bytes per sample against a count over a tiny batch (2 samples of 1 and 5
// entries), element by element from the arrays' own types, and against the numbers by hand.
TEST_CASE("bytes a step moves per sample: the formula against a hand count on a tiny batch") {
  const std::vector<std::int64_t> row_ptr{0, 1, 6};
  const std::vector<std::uint32_t> index{3, 0, 1, 2, 4, 5};
  const std::vector<std::uint16_t> field{0, 0, 1, 1, 2, 2};
  const std::vector<float> value(6, 1.0f), label{0.0f, 1.0f};
  for (WideShape shape :
       {WideShape{WideKind::LR, 6, 3, 0}, WideShape{WideKind::FM, 6, 3, 2}, WideShape{WideKind::FFM, 6, 3, 2}}) {
    for (int arrays : {1, 2, 3}) {
      double model = 0, input = 0;
      for (std::size_t i = 0; i + 1 < row_ptr.size(); ++i) {
        input += sizeof(row_ptr[0]) + sizeof(label[0]) + sizeof(float);  // offset, label, logit out
        for (std::int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e) {
          input += sizeof(index[0]) + sizeof(value[0]) + (shape.kind == WideKind::FFM ? sizeof(field[0]) : 0);
          model += double(arrays) * 2.0 * double(shape.row_len()) * sizeof(float);  // read + write
        }
      }
      const kernels::WideRowTraffic t = kernels::wide_row_traffic(shape, 6.0 / 2.0, arrays);
      INFO(kernels::wide_kind_name(shape.kind) << " arrays=" << arrays);
      CHECK(t.model_bytes == Approx(model / 2));
      CHECK(t.input_bytes == Approx(input / 2));
      CHECK(t.total() == Approx((model + input) / 2));
    }
  }
  // By hand, FFM with 3 fields and k = 2 (rows of 1 + 3 x 2 = 7 floats, 28 bytes) under AdaGrad
  // (parameters and n): 3 entries x 28 B x 2 (read, write) x 2 arrays = 336 B of model, and
  // 3 x (4 + 4 + 2) + 8 + 4 + 4 = 46 B of input; LR under SGD Hogwild: 3 x 4 x 2 = 24 + 40.
  CHECK(kernels::wide_row_traffic(WideShape{WideKind::FFM, 6, 3, 2}, 3.0, 2).model_bytes == 336.0);
  CHECK(kernels::wide_row_traffic(WideShape{WideKind::FFM, 6, 3, 2}, 3.0, 2).input_bytes == 46.0);
  CHECK(kernels::wide_row_traffic(WideShape{WideKind::LR, 6, 3, 0}, 3.0, 1).total() == 64.0);
}
