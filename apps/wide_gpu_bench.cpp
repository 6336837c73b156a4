// wide_gpu_bench: the CUDA gradient kernels of the wide models (LR, FM, FFM), classical schema
// (one thread per sample, global atomics) against flow schema (tiled CSC or warp per sample,
// shared-memory hot cache), on the same frequency-renumbered synthetic Criteo-like data, one
// epoch of mini-batch gradients each with the data already on the GPU, timed with CUDA events
// (median of repeats). Then whole training epochs through wide_train's CUDA path (WideTrainer,
// train.device = cuda: batches copied from the host, gradient, update): classical, flow, and
// flow with the next batch's copy overlapped on a second stream (median of repeats, wall
// time). The bound printed beside them is the CSR batch streamed once at the device's measured
// copy bandwidth. bench.export writes the data as safetensors for
// scripts/device/torch_wide_fm.py (PyTorch EmbeddingBag FM on the same rows). Without a GPU (or
// in a build without CUDA) the timing is skipped with a message; the data and export still run.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/safetensors.hpp"
#include "core/timer.hpp"
#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "lib/wide/bench_keys.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/trainer.hpp"
#include "mpi/runtime.hpp"

#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda_check.hpp"
#include "kernels/cuda_memory.hpp"
#include "kernels/cuda_timing.hpp"
#endif

using namespace skew;
using namespace skew::wide;

namespace {

#if defined(SKEW_WITH_CUDA)
using kernels::cuda::device_alloc;
using kernels::cuda::device_copy_bandwidth;
using kernels::cuda::median_ms;
using kernels::cuda::upload;

Json time_on_gpu(const SparseDataset& d, const WideModel& m, const kernels::WideFlowOptions& flow, std::int64_t batch,
                 int repeats) {
  const kernels::WideShape& shape = m.shape;
  auto* row_ptr = upload(d.row_ptr);
  auto* index = upload(d.index);
  auto* value = upload(d.value);
  auto* field = upload(d.field);
  auto* label = upload(d.label);
  auto* params = upload(m.params);
  float* grad = device_alloc<float>(m.params.size());
  float* logits = device_alloc<float>(std::size_t(d.rows()));
  auto batch_at = [&](std::int64_t begin) {
    kernels::WideBatch b;
    b.rows = std::min(batch, d.rows() - begin);
    b.row_ptr = row_ptr + begin;
    b.index = index;
    b.field = field;
    b.value = value;
    b.label = label + begin;
    return b;
  };
  // One epoch of gradients; the gradient accumulates across batches (both schemas alike).
  auto epoch = [&](bool use_flow) {
    for (std::int64_t begin = 0; begin < d.rows(); begin += batch) {
      const kernels::WideBatch b = batch_at(begin);
      if (use_flow)
        kernels::wide_flow_gradient_cuda(shape, flow, b, d.row_ptr[std::size_t(begin)],
                                         d.row_ptr[std::size_t(begin + b.rows)] - d.row_ptr[std::size_t(begin)], params,
                                         grad, logits + begin, nullptr);
      else
        kernels::wide_classical_gradient_cuda(shape, b, params, grad, logits + begin, nullptr);
    }
  };
  // The two schemas must compute the same gradient: compare one epoch of each (relative L2).
  std::vector<std::vector<float>> grads;
  for (bool use_flow : {false, true}) {
    SKEW_CUDA_CHECK(cudaMemset(grad, 0, m.params.size() * sizeof(float)));
    epoch(use_flow);
    SKEW_CUDA_CHECK(cudaDeviceSynchronize());
    grads.emplace_back(m.params.size());
    SKEW_CUDA_CHECK(cudaMemcpy(grads.back().data(), grad, m.params.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    diff += double(grads[1][i] - grads[0][i]) * double(grads[1][i] - grads[0][i]);
    norm += double(grads[0][i]) * double(grads[0][i]);
  }
  const double rel = std::sqrt(diff / std::max(norm, 1e-300));
  SKEW_CHECK(rel < 1e-3, "flow and classical gradients differ on the GPU: relative L2 error " << rel);
  const double classical_ms = median_ms(repeats, [&] { epoch(false); });
  const double flow_ms = median_ms(repeats, [&] { epoch(true); });
  for (void* p :
       {static_cast<void*>(row_ptr), static_cast<void*>(index), static_cast<void*>(value), static_cast<void*>(field),
        static_cast<void*>(label), static_cast<void*>(params), static_cast<void*>(grad), static_cast<void*>(logits)})
    SKEW_CUDA_CHECK(cudaFree(p));
  Json r;
  r["model"] = kernels::wide_kind_name(shape.kind);
  r["classical_ms"] = classical_ms;
  r["flow_ms"] = flow_ms;
  r["flow_speedup"] = classical_ms / flow_ms;
  r["flow_samples_per_s"] = double(d.rows()) / (flow_ms * 1e-3);
  r["gradient_rel_l2"] = rel;
  return r;
}

// Parameters uniform in [-0.01, 0.01) from a xorshift stream: WideModel::create draws a Philox
// normal per coordinate, which takes a minute for FFM's 650M parameters on one core; the
// benchmark needs varied, non-zero values only.
WideModel bench_model(const kernels::WideShape& shape) {
  WideModel m;
  m.shape = shape;
  m.params.resize(shape.num_params());
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (float& p : m.params) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p = 0.02f * (float(x >> 40) / float(1 << 24)) - 0.01f;
  }
  return m;
}

// Wall milliseconds of one training epoch through WideTrainer's CUDA path (median of repeats,
// after one warm-up epoch); SGD, so the only optimiser state is the parameters.
double train_epoch_ms(const SparseDataset& d, const WideModel& model, const kernels::WideFlowOptions& flow,
                      std::int64_t batch, int repeats, TrainSchema schema, bool overlap) {
  TrainOptions o;
  o.device = TrainDevice::Cuda;
  o.schema = schema;
  o.overlap = overlap;
  o.flow = flow;
  o.optimizer.kind = OptimizerKind::Sgd;
  o.optimizer.lr = 0.05f;
  WideTrainer trainer(model, o);
  std::vector<double> ms;
  for (int r = 0; r <= repeats; ++r) {
    Timer t;
    for (std::int64_t begin = 0; begin < d.rows(); begin += batch) {
      const std::int64_t end = std::min(d.rows(), begin + batch);
      trainer.step(d, begin, end, end, std::min(d.rows(), end + batch));
    }
    if (r > 0) ms.push_back(t.seconds() * 1e3);
  }
  std::nth_element(ms.begin(), ms.begin() + std::ptrdiff_t(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}
#endif

}  // namespace

int main(int argc, char** argv) {
  Schema schema("wide_gpu_bench", "CUDA classical vs flow gradient kernels on synthetic Criteo-like data.");
  add_bench_data_keys(schema, "fm,lr,ffm");
  schema.add_int("bench.k", 16, {1, 1024}, "latent dimension for FM");
  schema.add_int("bench.ffm_k", 4, {1, 1024}, "latent dimension for FFM (rows are 1 + fields * k floats)");
  schema.add_int("bench.train_repeats", 3, {1, 1000},
                 "timed training epochs per schema through wide_train's CUDA path (median)");
  schema.add_int("bench.batch_size", 16384, {1, 1 << 24}, "mini-batch size");
  add_bench_flow_keys(schema);
  schema.add_int("bench.repeats", 10, {1, 1000}, "timed epochs per schema (median reported)");
  schema.add_string("bench.export", "",
                    "write the renumbered data here as safetensors for the PyTorch script (empty = no)");
  return comm::run_main(argc, argv, false, [&](comm::Runtime&) {
    const Config c = Config::parse(schema, argc, argv);
    if (c.answer_help_or_print(std::cout, true)) return 0;
    ReadOptions read;
    read.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    SparseDataset d = load_dataset(c.get_string("bench.data"), read);
    FeatureOrder::by_frequency(feature_counts(d, d.num_features)).apply(d);
    const std::int64_t batch = c.get_int("bench.batch_size");
    SKEW_INFO("data: " << d.rows() << " rows, " << d.nnz() << " nonzeros, " << d.num_features << " features, batch "
                       << batch);
    if (!c.get_string("bench.export").empty()) {
      std::vector<std::int32_t> index(d.index.begin(), d.index.end());
      save_safetensors(c.get_string("bench.export"),
                       {{"row_ptr", Tensor::from_vector(d.row_ptr, {std::int64_t(d.row_ptr.size())})},
                        {"index", Tensor::from_vector(index, {d.nnz()})},
                        {"value", Tensor::from_vector(d.value, {d.nnz()})},
                        {"label", Tensor::from_vector(d.label, {d.rows()})}},
                       {{"num_features", std::to_string(d.num_features)}, {"batch_size", std::to_string(batch)}});
      SKEW_INFO("exported " << c.get_string("bench.export"));
    }
    Json summary;
    summary["rows"] = d.rows();
    summary["nnz"] = d.nnz();
    summary["batch_size"] = batch;
    if (cuda_device_count() == 0) {
      std::cout << "wide_gpu_bench: SKIPPED: no CUDA device (this build " << (cuda_built() ? "has" : "lacks")
                << " CUDA); the CPU schemas are benchmarked by wide_bench\n";
      summary["skipped"] = true;
      print_summary(summary);
      return 0;
    }
#if defined(SKEW_WITH_CUDA)
    const double bandwidth = device_copy_bandwidth(std::size_t(1) << 30, 10);
    // The least an epoch must stream: the CSR data once (ids, values, row offsets, labels).
    const double data_bytes = double(d.nnz()) * 8.0 + double(d.rows()) * 12.0;
    summary["copy_GBps"] = bandwidth / 1e9;
    summary["bound_ms"] = data_bytes / bandwidth * 1e3;
    const kernels::WideFlowOptions flow{c.get_int_as<int>("bench.tile_samples"), c.get_int("bench.hot_features")};
    Json runs = Json::array();
    for (const kernels::WideKind kind : bench_model_kinds(c)) {
      const int k = kind == kernels::WideKind::LR    ? 0
                    : kind == kernels::WideKind::FFM ? c.get_int_as<int>("bench.ffm_k")
                                                     : c.get_int_as<int>("bench.k");
      const WideModel model = bench_model({kind, d.num_features, d.num_fields, k});
      Json r = time_on_gpu(d, model, flow, batch, c.get_int_as<int>("bench.repeats"));
      r["k"] = k;
      const int train_repeats = c.get_int_as<int>("bench.train_repeats");
      const double train_classical =
          train_epoch_ms(d, model, flow, batch, train_repeats, TrainSchema::Classical, false);
      const double train_flow = train_epoch_ms(d, model, flow, batch, train_repeats, TrainSchema::Flow, false);
      const double train_overlap = train_epoch_ms(d, model, flow, batch, train_repeats, TrainSchema::Flow, true);
      r["train_classical_ms"] = train_classical;
      r["train_flow_ms"] = train_flow;
      r["train_flow_overlap_ms"] = train_overlap;
      r["train_flow_speedup"] = train_classical / train_flow;
      r["train_flow_overlap_speedup"] = train_classical / train_overlap;
      r["overlap_gain"] = train_flow / train_overlap;
      SKEW_INFO(r["model"].get<std::string>()
                << " training epochs (copies included): classical " << train_classical << " ms, flow " << train_flow
                << " ms, flow+overlap " << train_overlap << " ms");
      SKEW_INFO(r["model"].get<std::string>()
                << ": classical " << r["classical_ms"].get<double>() << " ms, flow " << r["flow_ms"].get<double>()
                << " ms per epoch, flow/classical speedup " << r["flow_speedup"].get<double>() << "x; streaming bound "
                << data_bytes / bandwidth * 1e3 << " ms");
      runs.push_back(r);
    }
    summary["runs"] = runs;
#endif
    print_summary(summary);
    return 0;
  });
}
