// The CUDA path of the wide models against the float64 reference and against the CPU trainer:
// forward values and gradients of every model (LR, FM, FFM) and schema (classical, flow) on
// the same batch, computed through WideTrainer with train.device = cuda (batch staged in
// pinned buffers, copied, kernels of kernels/cuda), and short training runs on the GPU (with
// and without copy/compute overlap) that must end where the CPU run ends. Further cases aim at
// the paths of the flow kernels: runs of one feature longer than a warp's window inside one
// tile (the segmented reduction, hot and cold), a batch over many blocks (the per-block bias
// sum), ragged FFM rows (the pair list's remainders over 32 lanes), and tile and cache sizes
// the kernels cap (they log the sizes used and must still be exact).
#include <catch2/catch.hpp>
#include <cmath>

#include "lib/wide/trainer.hpp"
#include "tests/cuda_skip.hpp"
#include "tests/unit/wide_reference.hpp"

using namespace skew;
using namespace skew::wide;
using namespace skew::wide::reference;

TEST_CASE("CUDA logits and gradients equal the float64 reference (LR, FM, FFM, classical, flow)") {
  SKEW_REQUIRE_GPU();
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    Setup s = make_setup(kind, 300);
    const BatchReference ref = batch_reference(s);
    REQUIRE(ref.grad_scale > 0.1);
    for (const char* schema : {"classical", "flow"}) {
      TrainOptions o;
      o.device = TrainDevice::Cuda;
      o.schema = schema_from_name(schema);
      o.flow.tile_samples = 32;
      o.flow.hot_features = 64;
      WideTrainer t(s.model, o);
      std::vector<float> g, logits;
      // Two batches through one trainer: the second reuses the staging buffers of the first.
      t.gradient(s.data, 0, 100, g, logits);
      std::vector<float> g_rest, logits_rest;
      t.gradient(s.data, 100, 300, g_rest, logits_rest);
      for (std::size_t c = 0; c < g.size(); ++c) g[c] += g_rest[c];
      logits.insert(logits.end(), logits_rest.begin(), logits_rest.end());
      INFO(kernels::wide_kind_name(kind) << " " << schema);
      REQUIRE(logits.size() == ref.logits.size());
      const BatchError err = batch_error(ref, logits, g);
      CHECK(err.logit < 1e-4);
      CHECK(err.grad < 1e-4);
    }
  }
}

namespace {

// The batch gradient of rows [0, rows) through the CUDA trainer against the float64 reference.
void require_reference_gradient(const Setup& s, const char* schema, int tile_samples, std::int64_t hot_features) {
  const BatchReference ref = batch_reference(s);
  REQUIRE(ref.grad_scale > 0.1);
  TrainOptions o;
  o.device = TrainDevice::Cuda;
  o.schema = schema_from_name(schema);
  o.flow.tile_samples = tile_samples;
  o.flow.hot_features = hot_features;
  WideTrainer t(s.model, o);
  std::vector<float> g, logits;
  t.gradient(s.data, 0, s.data.rows(), g, logits);
  INFO(kernels::wide_kind_name(s.shape.kind) << " " << schema << " tile " << tile_samples << " hot " << hot_features);
  REQUIRE(logits.size() == ref.logits.size());
  const BatchError err = batch_error(ref, logits, g);
  CHECK(err.logit < 1e-4);
  CHECK(err.grad < 1e-4);
}

}  // namespace

TEST_CASE("CUDA flow reduces long runs of one feature in a tile exactly (hot and cold, LR, FM)") {
  SKEW_REQUIRE_GPU();
  for (WideKind kind : {WideKind::LR, WideKind::FM}) {
    // 48 distinct ids over 39 entries a sample: the hottest ids recur in nearly every sample, so
    // a tile of 64 samples sorts into runs longer than one 32-entry window.
    Setup s = make_setup(kind, 1000);
    for (auto& id : s.data.index) id %= 48;
    for (std::int64_t hot : {std::int64_t(0), std::int64_t(8), std::int64_t(4096)})
      require_reference_gradient(s, "flow", 64, hot);
  }
}

TEST_CASE("CUDA bias gradient over many blocks and tiles equals the reference (classical, flow)") {
  SKEW_REQUIRE_GPU();
  // 1000 samples: 8 blocks of 128 in the classical kernels, the last one partial; 16 tiles.
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    Setup s = make_setup(kind, 1000);
    for (const char* schema : {"classical", "flow"}) require_reference_gradient(s, schema, 64, 64);
  }
}

TEST_CASE("CUDA FFM on ragged rows (every pair-list remainder) equals the reference") {
  SKEW_REQUIRE_GPU();
  Setup s = make_ragged_setup(WideKind::FFM, 400);
  for (const char* schema : {"classical", "flow"}) require_reference_gradient(s, schema, 32, 64);
  require_reference_gradient(s, "flow", 32, 0);
}

TEST_CASE("CUDA flow with a tile and a hot cache larger than the kernels hold uses the sizes it can, exactly") {
  SKEW_REQUIRE_GPU();
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM})
    require_reference_gradient(make_setup(kind, 600), "flow", 256, std::int64_t(1) << 20);
}

TEST_CASE("CUDA steps update exactly the rows their batches touched (the device's touched list)") {
  SKEW_REQUIRE_GPU();
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    // Batch 1 uses ids 0..99 only, batch 2 ids 100..199; rows 200.. are never touched. With L2
    // on, a row updated by mistake (a stale or missing list entry) moves even with zero gradient.
    Setup s = make_setup(kind, 200);
    for (std::int64_t i = 0; i < 200; ++i)
      for (std::int64_t e = s.data.row_ptr[std::size_t(i)]; e < s.data.row_ptr[std::size_t(i) + 1]; ++e)
        s.data.index[std::size_t(e)] = s.data.index[std::size_t(e)] % 100 + (i < 100 ? 0 : 100);
    std::vector<std::vector<float>> after;  // CPU, then CUDA
    for (TrainDevice device : {TrainDevice::Cpu, TrainDevice::Cuda}) {
      TrainOptions o;
      o.device = device;
      o.schema = TrainSchema::Flow;
      o.optimizer.lr = 0.1f;
      o.optimizer.l2 = 1e-2f;
      o.flow.tile_samples = 32;
      o.flow.hot_features = 16;
      WideTrainer t(s.model, o);
      t.step(s.data, 0, 100, 100, 200);
      const std::vector<float> first = copy_to_vector(t.parameters());
      const int L = s.shape.row_len();
      for (std::int64_t f = 100; f < 2000; ++f)  // after batch 1, rows 100.. untouched
        for (int j = 0; j < L; ++j)
          REQUIRE(first[std::size_t(1 + f * L + j)] == s.model.params[std::size_t(1 + f * L + j)]);
      t.step(s.data, 100, 200, 0, 0);
      after.push_back(copy_to_vector(t.parameters()));
    }
    const int L = s.shape.row_len();
    double worst = 0;
    for (std::size_t c = 0; c < after[0].size(); ++c)
      worst = std::max(worst, double(std::fabs(after[1][c] - after[0][c])));
    for (std::int64_t f = 200; f < 2000; ++f)
      for (int j = 0; j < L; ++j)
        REQUIRE(after[1][std::size_t(1 + f * L + j)] == s.model.params[std::size_t(1 + f * L + j)]);
    INFO(kernels::wide_kind_name(kind));
    CHECK(worst < 1e-4);
  }
}

TEST_CASE("CUDA training (with and without overlap) ends where the CPU training ends") {
  SKEW_REQUIRE_GPU();
  // Every model and schema under AdaGrad; LR flow also under SGD (no optimizer state) and FTRL
  // (two state arrays, z set from the starting weights).
  struct Case {
    WideKind kind;
    const char* schema;
    const char* optimizer;
  };
  std::vector<Case> cases;
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM})
    for (const char* schema : {"classical", "flow"}) cases.push_back({kind, schema, "adagrad"});
  cases.push_back({WideKind::LR, "flow", "sgd"});
  cases.push_back({WideKind::LR, "flow", "ftrl"});
  for (const auto& [kind, schema, optimizer] : cases) {
    {
      Setup s = make_setup(kind, 600);
      std::vector<std::vector<float>> params;
      std::vector<double> last_loss;
      for (int run = 0; run < 3; ++run) {  // CPU, CUDA without overlap, CUDA with overlap
        TrainOptions o;
        o.schema = schema_from_name(schema);
        o.device = run == 0 ? TrainDevice::Cpu : TrainDevice::Cuda;
        o.classical_sync = ClassicalSync::Atomic;  // CUDA classical is the batch-gradient kind
        o.overlap = run == 2;
        o.optimizer.kind = optimizer_from_name(optimizer);
        o.optimizer.lr = 0.1f;
        o.optimizer.l2 = 1e-3f;
        o.flow.tile_samples = 32;
        o.flow.hot_features = 64;
        WideTrainer t(s.model, o);
        double loss = 0;
        for (int epoch = 0; epoch < 2; ++epoch)
          for (std::int64_t b = 0; b < 600; b += 100)
            loss = t.step(s.data, b, b + 100, b + 100, std::min<std::int64_t>(600, b + 200)).loss;
        params.push_back(copy_to_vector(t.parameters()));
        last_loss.push_back(loss);
      }
      for (int run = 1; run < 3; ++run) {
        INFO(kernels::wide_kind_name(kind)
             << " " << schema << " " << optimizer << (run == 2 ? " overlap" : " no overlap"));
        CHECK(last_loss[std::size_t(run)] == Approx(last_loss[0]).epsilon(1e-4));
        double worst = 0, moved = 0;
        for (std::size_t c = 0; c < params[0].size(); ++c) {
          worst = std::max(worst, double(std::fabs(params[std::size_t(run)][c] - params[0][c])));
          moved = std::max(moved, double(std::fabs(params[0][c] - s.model.params[c])));
        }
        CHECK(moved > 0.01);
        CHECK(worst < 1e-3 * moved);
      }
    }
  }
}
