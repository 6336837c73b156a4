// wide_bench: classical vs flow training throughput on the same synthetic Criteo-like data, in
// one run, with the memory-bandwidth bound measured alongside (a threaded triad at the run's
// threads) and printed beside each figure: bytes per row, the rows/s they allow, the fraction
// achieved. For each model, three runs of the
// same epoch: classical on the generator's ids, classical on frequency-renumbered ids (what
// renumbering alone buys), and flow (renumbered, tiled CSC, hot-feature caching). The three are
// interleaved and repeated (bench.repeats), and each figure is the median over the repeats, of
// wall time and of process CPU time (all threads): on a shared machine the CPU time is the
// steadier measure of the work a schema does.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <thread>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/timer.hpp"
#include "lib/wide/bench_keys.hpp"
#include "lib/wide/trainer.hpp"
#include "mpi/runtime.hpp"

using namespace skew;
using namespace skew::wide;

namespace {

// Memory bandwidth as STREAM's triad measures it (a = b + s c: two floats read and one written
// per element, 12 bytes) with `threads` threads on their own slices, over three arrays of
// `floats` floats each, far larger than the last-level cache; the best of five passes. Each
// thread first touches its own slice, so its pages are where it runs.
double triad_bandwidth(std::size_t floats, int threads) {
  std::vector<float> a(floats), b(floats), c(floats);
  const auto each_slice = [&](auto fn) {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        fn(floats * std::size_t(t) / std::size_t(threads), floats * std::size_t(t + 1) / std::size_t(threads));
      });
    for (std::thread& w : workers) w.join();
  };
  each_slice([&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
  });
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Timer t;
    each_slice([&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
    });
    best = std::max(best, 12.0 * double(floats) / t.seconds());
    b[std::size_t(rep)] = a[floats - 1 - std::size_t(rep)];  // a is read, so the passes are not dead stores
  }
  return best;
}

struct Run {
  double seconds = 0, cpu_seconds = 0, loss = 0, kernel_seconds = 0;
  std::int64_t samples = 0, nonzeros = 0;
};

Run time_epoch(const SparseDataset& data, const kernels::WideShape& shape, const TrainOptions& o, std::int64_t batch) {
  WideTrainer trainer(WideModel::create(shape, 1, 0.01f), o);
  trainer.step(data, 0, std::min(data.rows(), batch));  // warm-up: page in parameters and scratch
  Run run;
  const double cpu_start = process_cpu_seconds();
  Timer t;
  for (std::int64_t b = batch; b < data.rows(); b += batch) {
    const StepResult r = trainer.step(data, b, std::min(data.rows(), b + batch));
    run.samples += r.samples;
    run.nonzeros += r.nonzeros;
    run.loss += r.loss * double(r.samples);
    run.kernel_seconds += r.kernel_seconds;
  }
  run.seconds = t.seconds();
  run.cpu_seconds = process_cpu_seconds() - cpu_start;
  run.loss /= double(std::max<std::int64_t>(1, run.samples));
  return run;
}

// The run with the median wall time, with the median CPU and kernel times beside it.
Run median_run(std::vector<Run> runs) {
  const auto median = [&](auto member) {
    std::vector<double> v;
    for (const Run& r : runs) v.push_back(r.*member);
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double cpu = median(&Run::cpu_seconds), kernel = median(&Run::kernel_seconds);
  std::nth_element(runs.begin(), runs.begin() + std::ptrdiff_t(runs.size() / 2), runs.end(),
                   [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  Run r = runs[runs.size() / 2];
  r.cpu_seconds = cpu;
  r.kernel_seconds = kernel;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Schema schema("wide_bench", "Classical vs flow training throughput on synthetic Criteo-like data.");
  add_bench_data_keys(schema, "lr,fm");
  schema.add_int("bench.k", 16, {1, 1024}, "latent dimension for FM/FFM");
  schema.add_int("bench.batch_size", 4096, {1, 1 << 24}, "mini-batch size");
  schema.add_int("bench.threads", 2, {1, 1024}, "worker threads");
  schema.add_choice("bench.classical_sync", "hogwild", {"hogwild", "atomic"},
                    "classical: per-sample Hogwild updates, or the batch gradient with atomic adds (wide_train's "
                    "train.classical_sync)");
  schema.add_choice("bench.optimizer", "sgd", {"sgd", "adagrad", "ftrl"}, "optimizer (same for all schemas)");
  add_bench_flow_keys(schema);
  schema.add_int(
      "bench.replica_budget_mb", 16, {0, 1 << 20},
      "flow LR: every feature hot if threads x features x 4 B fit and a batch has features / 8 entries (0 = never)");
  schema.add_int("bench.repeats", 3, {1, 1000}, "interleaved repeats of the three runs per model (medians reported)");
  schema.add_string("bench.csv", "", "CSV output path (empty = none)");
  return comm::run_main(argc, argv, false, [&](comm::Runtime&) {
    const Config c = Config::parse(schema, argc, argv);
    if (c.answer_help_or_print(std::cout, true)) return 0;
    ReadOptions ro;
    ro.threads = c.get_int_as<int>("bench.threads");
    Timer load;
    SparseDataset original = load_dataset(c.get_string("bench.data"), ro);
    SparseDataset renumbered = original;
    FeatureOrder::by_frequency(feature_counts(original, original.num_features)).apply(renumbered);
    // 3 x 2^26 floats (768 MiB) against an LLC of tens of MiB, with the run's threads.
    const double bandwidth = triad_bandwidth(std::size_t(1) << 26, ro.threads);
    const double entries_per_row = double(original.nnz()) / double(std::max<std::int64_t>(1, original.rows()));
    SKEW_INFO("data: " << original.rows() << " rows, " << original.nnz() << " nonzeros, " << original.num_features
                       << " features (" << load.seconds() << " s); triad bandwidth " << bandwidth / 1e9 << " GB/s at "
                       << ro.threads << " threads");
    std::unique_ptr<CsvWriter> csv;
    if (!c.get_string("bench.csv").empty())
      csv = std::make_unique<CsvWriter>(c.get_string("bench.csv"), std::vector<std::string>{"model",
                                                                                            "schema",
                                                                                            "ids",
                                                                                            "threads",
                                                                                            "rows",
                                                                                            "features",
                                                                                            "k",
                                                                                            "batch",
                                                                                            "seconds",
                                                                                            "samples_per_s",
                                                                                            "nonzeros_per_s",
                                                                                            "ratio_vs_classical",
                                                                                            "cpu_seconds",
                                                                                            "cpu_ratio_vs_classical",
                                                                                            "kernel_seconds",
                                                                                            "kernel_ratio_vs_classical",
                                                                                            "triad_GBps",
                                                                                            "bytes_per_row",
                                                                                            "bound_samples_per_s",
                                                                                            "bound_fraction",
                                                                                            "train_logloss"});
    // bytes/row: what a sample moves if every row it touches comes from memory
    // (kernels::wide_row_traffic); bound: the rows/s that traffic allows at the triad bandwidth;
    // of_bound: the achieved fraction of it (above 1 where hot rows stay in the caches).
    std::printf("%-4s %-10s %-10s %8s %12s %14s %8s %8s %9s %9s %9s %9s %12s %8s %8s\n", "model", "schema", "ids",
                "seconds", "samples/s", "nonzeros/s", "ratio", "cpu_s", "cpu_ratio", "kernel_s", "k_ratio", "bytes/row",
                "bound", "of_bound", "loss");
    Json summary{{"app", "wide_bench"}, {"triad_GBps", bandwidth / 1e9}};
    for (const kernels::WideKind kind : bench_model_kinds(c)) {
      const std::string name = kernels::wide_kind_name(kind);
      kernels::WideShape shape;
      shape.kind = kind;
      shape.num_features = original.num_features;
      shape.num_fields = original.num_fields;
      shape.k = shape.kind == kernels::WideKind::LR ? 0 : c.get_int_as<int>("bench.k");
      TrainOptions o;
      o.threads = c.get_int_as<int>("bench.threads");
      o.classical_sync = classical_sync_from_name(c.get_string("bench.classical_sync"));
      o.optimizer.kind = optimizer_from_name(c.get_string("bench.optimizer"));
      o.optimizer.lr = 0.05f;
      o.flow.tile_samples = c.get_int_as<int>("bench.tile_samples");
      o.flow.hot_features = c.get_int("bench.hot_features");
      o.flow.replica_budget_bytes = c.get_int("bench.replica_budget_mb") << 20;
      struct Case {
        const char* schema;
        const char* ids;
        const SparseDataset* data;
      };
      const std::vector<Case> cases{Case{"classical", "original", &original},
                                    Case{"classical", "renumbered", &renumbered},
                                    Case{"flow", "renumbered", &renumbered}};
      std::vector<std::vector<Run>> runs(cases.size());
      for (std::int64_t rep = 0; rep < std::max<std::int64_t>(1, c.get_int("bench.repeats")); ++rep)
        for (std::size_t i = 0; i < cases.size(); ++i) {
          o.schema = schema_from_name(cases[i].schema);
          runs[i].push_back(time_epoch(*cases[i].data, shape, o, c.get_int("bench.batch_size")));
        }
      double classical_rate = 0, classical_kernel = 0, classical_cpu = 0;
      for (std::size_t i = 0; i < cases.size(); ++i) {
        const Case& cs = cases[i];
        const Run r = median_run(runs[i]);
        const double rate = double(r.samples) / r.seconds;
        if (classical_rate == 0) classical_rate = rate;
        if (classical_kernel == 0) classical_kernel = r.kernel_seconds;
        if (classical_cpu == 0) classical_cpu = r.cpu_seconds;
        o.schema = schema_from_name(cs.schema);
        const double bytes_per_row =
            kernels::wide_row_traffic(shape, entries_per_row, model_shaped_arrays(o, 1)).total();
        const double bound_rate = bandwidth / bytes_per_row;
        std::printf("%-4s %-10s %-10s %8.2f %12.0f %14.0f %8.2f %8.2f %9.2f %9.2f %9.2f %9.0f %12.0f %8.3f %8.4f\n",
                    name.c_str(), cs.schema, cs.ids, r.seconds, rate, double(r.nonzeros) / r.seconds,
                    rate / classical_rate, r.cpu_seconds, classical_cpu / r.cpu_seconds, r.kernel_seconds,
                    classical_kernel / r.kernel_seconds, bytes_per_row, bound_rate, rate / bound_rate, r.loss);
        std::fflush(stdout);
        summary[name + "_" + cs.schema + "_" + cs.ids + "_samples_per_s"] = rate;
        summary[name + "_" + cs.schema + "_" + cs.ids + "_cpu_ratio"] = classical_cpu / r.cpu_seconds;
        summary[name + "_" + cs.schema + "_" + cs.ids + "_bound_samples_per_s"] = bound_rate;
        summary[name + "_" + cs.schema + "_" + cs.ids + "_bound_fraction"] = rate / bound_rate;
        if (csv)
          csv->row({name,
                    cs.schema,
                    cs.ids,
                    std::to_string(o.threads),
                    std::to_string(original.rows()),
                    std::to_string(original.num_features),
                    std::to_string(shape.k),
                    std::to_string(c.get_int("bench.batch_size")),
                    csv_number(r.seconds),
                    csv_number(rate),
                    csv_number(double(r.nonzeros) / r.seconds),
                    csv_number(rate / classical_rate),
                    csv_number(r.cpu_seconds),
                    csv_number(classical_cpu / r.cpu_seconds),
                    csv_number(r.kernel_seconds),
                    csv_number(classical_kernel / r.kernel_seconds),
                    csv_number(bandwidth / 1e9),
                    csv_number(bytes_per_row),
                    csv_number(bound_rate),
                    csv_number(rate / bound_rate),
                    csv_number(r.loss)});
      }
    }
    print_summary(summary);
    return 0;
  });
}
