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
#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include "apps/bench/harness.hpp"
#include "apps/bench/machine.hpp"
#include "apps/bench/wide_keys.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/safetensors.hpp"
#include "kernels/wide_classical.hpp"
#include "kernels/wide_flow.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/trainer.hpp"
#include "mpi/runtime.hpp"

#if defined(SKEW_WITH_CUDA)
#include <cuda_runtime.h>

#include "apps/bench/device_operand.hpp"
#include "core/cuda_check.hpp"
#include "kernels/cuda_timing.hpp"
#endif

using namespace skew;
using namespace skew::wide;

namespace {

struct Options {
  std::string data, export_path;
  std::vector<kernels::WideKind> models;
  int k, ffm_k, repeats, train_repeats;
  std::int64_t batch_size;
  kernels::WideFlowOptions flow;
};

Schema make_schema() {
  Schema schema("wide_gpu_bench", "CUDA classical vs flow gradient kernels on synthetic Criteo-like data.");
  bench::add_wide_data_keys(schema, "fm,lr,ffm");
  schema.add_int("bench.k", 16, {1, 1024}, "latent dimension for FM");
  schema.add_int("bench.ffm_k", 4, {1, 1024}, "latent dimension for FFM (rows are 1 + fields * k floats)");
  schema.add_int("bench.train_repeats", 3, {1, 1000},
                 "timed training epochs per schema through wide_train's CUDA path (median)");
  schema.add_int("bench.batch_size", 16384, {1, 1 << 24}, "mini-batch size");
  bench::add_wide_flow_keys(schema);
  schema.add_int("bench.repeats", 10, {1, 1000}, "timed epochs per schema (median reported)");
  schema.add_string("bench.export", "",
                    "write the renumbered data here as safetensors for the PyTorch script (empty = no)");
  return schema;
}

Options read_options(const Config& c) {
  Options o;
  o.data = c.get_string("bench.data");
  o.export_path = c.get_string("bench.export");
  o.models = bench::wide_model_kinds(c);
  o.k = c.get_int_as<int>("bench.k");
  o.ffm_k = c.get_int_as<int>("bench.ffm_k");
  o.repeats = c.get_int_as<int>("bench.repeats");
  o.train_repeats = c.get_int_as<int>("bench.train_repeats");
  o.batch_size = c.get_int("bench.batch_size");
  o.flow = bench::wide_flow_options(c);
  return o;
}

// The data as safetensors for scripts/device/torch_wide_fm.py.
void export_data(const SparseDataset& d, const std::string& path, std::int64_t batch) {
  std::vector<std::int32_t> index(d.index.begin(), d.index.end());
  save_safetensors(path,
                   {{"row_ptr", Tensor::from_vector(d.row_ptr, {std::int64_t(d.row_ptr.size())})},
                    {"index", Tensor::from_vector(index, {d.nnz()})},
                    {"value", Tensor::from_vector(d.value, {d.nnz()})},
                    {"label", Tensor::from_vector(d.label, {d.rows()})}},
                   {{"num_features", std::to_string(d.num_features)}, {"batch_size", std::to_string(batch)}});
  SKEW_INFO("exported " << path);
}

#if defined(SKEW_WITH_CUDA)
// A dataset's arrays and a model's parameters on the device, with its gradient and logits.
struct DeviceData {
  bench::DeviceOperand<std::int64_t> row_ptr;
  bench::DeviceOperand<std::uint32_t> index;
  bench::DeviceOperand<float> value;
  bench::DeviceOperand<std::uint16_t> field;
  bench::DeviceOperand<float> label, params, grad, logits;
  DeviceData(const SparseDataset& d, const WideModel& m)
      : row_ptr(d.row_ptr),
        index(d.index),
        value(d.value),
        field(d.field),
        label(d.label),
        params(m.params),
        grad(m.params.size()),
        logits{std::size_t(d.rows())} {}
};

// One epoch of gradients on the device; the gradient accumulates across batches (both schemas alike).
void gradient_epoch(const SparseDataset& d, const kernels::WideShape& shape, const kernels::WideFlowOptions& flow,
                    std::int64_t batch, const DeviceData& g, bool use_flow) {
  for (std::int64_t begin = 0; begin < d.rows(); begin += batch) {
    const kernels::WideBatch b =
        rows_batch(g.row_ptr, g.index, g.field, g.value, g.label, begin, std::min(d.rows(), begin + batch));
    if (use_flow)
      kernels::wide_flow_gradient_cuda(shape, flow, b, d.row_ptr[std::size_t(begin)],
                                       d.row_ptr[std::size_t(begin + b.rows)] - d.row_ptr[std::size_t(begin)], g.params,
                                       g.grad, g.logits.get() + begin, nullptr);
    else
      kernels::wide_classical_gradient_cuda(shape, b, g.params, g.grad, g.logits.get() + begin, nullptr);
  }
}

// The two schemas must compute the same gradient: one epoch of each, their relative L2 distance.
double gradient_distance(const std::function<void(bool)>& epoch, const DeviceData& g, std::size_t params) {
  std::vector<std::vector<float>> grads;
  for (bool use_flow : {false, true}) {
    SKEW_CUDA_CHECK(cudaMemset(g.grad, 0, params * sizeof(float)));
    epoch(use_flow);
    SKEW_CUDA_CHECK(cudaDeviceSynchronize());
    grads.emplace_back(params);
    SKEW_CUDA_CHECK(cudaMemcpy(grads.back().data(), g.grad, params * sizeof(float), cudaMemcpyDeviceToHost));
  }
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < grads[0].size(); ++i) {
    diff += double(grads[1][i] - grads[0][i]) * double(grads[1][i] - grads[0][i]);
    norm += double(grads[0][i]) * double(grads[0][i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

Json time_on_gpu(const SparseDataset& d, const WideModel& m, const kernels::WideFlowOptions& flow, std::int64_t batch,
                 int repeats) {
  const kernels::WideShape& shape = m.shape;
  const DeviceData g(d, m);
  const auto epoch = [&](bool use_flow) { gradient_epoch(d, shape, flow, batch, g, use_flow); };
  const double rel = gradient_distance(epoch, g, m.params.size());
  SKEW_CHECK(rel < 1e-3, "flow and classical gradients differ on the GPU: relative L2 error " << rel);
  const double classical_ms = kernels::cuda::median_ms(repeats, [&] { epoch(false); });
  const double flow_ms = kernels::cuda::median_ms(repeats, [&] { epoch(true); });
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
  return bench::median_wall_ms(1, repeats, [&] {
    for (std::int64_t begin = 0; begin < d.rows(); begin += batch) {
      const std::int64_t end = std::min(d.rows(), begin + batch);
      trainer.step(d, begin, end, end, std::min(d.rows(), end + batch));
    }
  });
}

// One model's row: the gradient kernels, then the training epochs.
Json bench_model_row(kernels::WideKind kind, const SparseDataset& d, const Options& o, double bound_ms) {
  const int k = kind == kernels::WideKind::LR ? 0 : kind == kernels::WideKind::FFM ? o.ffm_k : o.k;
  const WideModel model = bench_model({kind, d.num_features, d.num_fields, k});
  const std::int64_t batch = o.batch_size;
  Json r = time_on_gpu(d, model, o.flow, batch, o.repeats);
  r["k"] = k;
  const double train_classical =
      train_epoch_ms(d, model, o.flow, batch, o.train_repeats, TrainSchema::Classical, false);
  const double train_flow = train_epoch_ms(d, model, o.flow, batch, o.train_repeats, TrainSchema::Flow, false);
  const double train_overlap = train_epoch_ms(d, model, o.flow, batch, o.train_repeats, TrainSchema::Flow, true);
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
            << bound_ms << " ms");
  return r;
}

// Every model's row into `summary`, set against the device's copy bandwidth.
void bench_on_gpu(const SparseDataset& d, const Options& o, Json& summary) {
  const double bandwidth = kernels::cuda::device_copy_bandwidth(std::size_t(1) << 30, 10);
  // The least an epoch must stream: the CSR data once (ids, values, row offsets, labels).
  const double data_bytes = double(d.nnz()) * 8.0 + double(d.rows()) * 12.0;
  summary["copy_GBps"] = bandwidth / 1e9;
  summary["bound_ms"] = data_bytes / bandwidth * 1e3;
  Json runs = Json::array();
  for (const kernels::WideKind kind : o.models)
    runs.push_back(bench_model_row(kind, d, o, data_bytes / bandwidth * 1e3));
  summary["runs"] = runs;
}
#endif

// Loads and renumbers the data, exports it where asked, and times it where a GPU is present.
int run(const Options& o) {
  ReadOptions read;
  read.threads = int(std::max(1u, std::thread::hardware_concurrency()));
  SparseDataset d = load_dataset(o.data, read);
  FeatureOrder::by_frequency(feature_counts(d, d.num_features)).apply(d);
  SKEW_INFO("data: " << d.rows() << " rows, " << d.nnz() << " nonzeros, " << d.num_features << " features, batch "
                     << o.batch_size);
  if (!o.export_path.empty()) export_data(d, o.export_path, o.batch_size);
  Json summary;
  summary["rows"] = d.rows();
  summary["nnz"] = d.nnz();
  summary["batch_size"] = o.batch_size;
  summary["machine"] = bench::machine_json(bench::this_machine());
  if (bench::skipped_without_gpu("wide_gpu_bench", "; the CPU schemas are benchmarked by wide_bench", summary))
    return 0;
  bench::print_machine_header(1);  // one host thread drives the GPU
#if defined(SKEW_WITH_CUDA)
  bench_on_gpu(d, o, summary);
#endif
  print_summary(summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, make_schema(), false, bench::HelpFrom::EveryRank,
                         [](const Config& c, comm::Runtime&) { return run(read_options(c)); });
}
