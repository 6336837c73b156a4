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
#include <cstdio>
#include <iostream>
#include <thread>

#include "apps/bench/harness.hpp"
#include "apps/bench/machine.hpp"
#include "apps/bench/table.hpp"
#include "apps/bench/wide_keys.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/timer.hpp"
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
  const double cpu = bench::median_of(runs, &Run::cpu_seconds), kernel = bench::median_of(runs, &Run::kernel_seconds);
  std::nth_element(runs.begin(), runs.begin() + std::ptrdiff_t(runs.size() / 2), runs.end(),
                   [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
  Run r = runs[runs.size() / 2];
  r.cpu_seconds = cpu;
  r.kernel_seconds = kernel;
  return r;
}

struct Options {
  std::string data;
  std::vector<kernels::WideKind> models;
  int k;
  std::int64_t batch_size;
  std::int64_t repeats;
  std::string csv;
  TrainOptions train;  // threads, classical sync, optimizer (lr 0.05), flow settings; schema per run
};

Schema make_schema() {
  Schema schema("wide_bench", "Classical vs flow training throughput on synthetic Criteo-like data.");
  bench::add_wide_data_keys(schema, "lr,fm");
  schema.add_int("bench.k", 16, {1, 1024}, "latent dimension for FM/FFM");
  schema.add_int("bench.batch_size", 4096, {1, 1 << 24}, "mini-batch size");
  schema.add_int("bench.threads", 2, {1, 1024}, "worker threads");
  schema.add_choice("bench.classical_sync", "hogwild", {"hogwild", "atomic"},
                    "classical: per-sample Hogwild updates, or the batch gradient with atomic adds (wide_train's "
                    "train.classical_sync)");
  schema.add_choice("bench.optimizer", "sgd", {"sgd", "adagrad", "ftrl"}, "optimizer (same for all schemas)");
  bench::add_wide_flow_keys(schema);
  schema.add_int(
      "bench.replica_budget_mb", 16, {0, 1 << 20},
      "flow LR: every feature hot if threads x features x 4 B fit and a batch has features / 8 entries (0 = never)");
  schema.add_int("bench.repeats", 3, {1, 1000}, "interleaved repeats of the three runs per model (medians reported)");
  schema.add_string("bench.csv", "", "CSV output path (empty = none)");
  return schema;
}

Options read_options(const Config& c) {
  Options o;
  o.data = c.get_string("bench.data");
  o.models = bench::wide_model_kinds(c);
  o.k = c.get_int_as<int>("bench.k");
  o.batch_size = c.get_int("bench.batch_size");
  o.repeats = std::max<std::int64_t>(1, c.get_int("bench.repeats"));
  o.csv = c.get_string("bench.csv");
  o.train.threads = c.get_int_as<int>("bench.threads");
  o.train.classical_sync = classical_sync_from_name(c.get_string("bench.classical_sync"));
  o.train.optimizer.kind = optimizer_from_name(c.get_string("bench.optimizer"));
  o.train.optimizer.lr = 0.05f;
  o.train.flow = bench::wide_flow_options(c);
  o.train.flow.replica_budget_bytes = c.get_int("bench.replica_budget_mb") << 20;
  return o;
}

// The data twice: the generator's ids, and renumbered by frequency (what flow trains on).
struct BenchData {
  SparseDataset original, renumbered;
  double entries_per_row;
};

// One schema on one id order, a row of the table.
struct Case {
  const char* schema;
  const char* ids;
  const SparseDataset* data;
};

// The three cases of each model, interleaved over the repeats: each case's runs.
std::vector<std::vector<Run>> run_cases(const std::vector<Case>& cases, const kernels::WideShape& shape,
                                        const Options& o) {
  TrainOptions train = o.train;
  std::vector<std::vector<Run>> runs(cases.size());
  for (std::int64_t rep = 0; rep < o.repeats; ++rep)
    for (std::size_t i = 0; i < cases.size(); ++i) {
      train.schema = schema_from_name(cases[i].schema);
      runs[i].push_back(time_epoch(*cases[i].data, shape, train, o.batch_size));
    }
  return runs;
}

// A case's figures beside the first (classical) case's and the bandwidth bound.
struct Row {
  Run run;
  double rate, ratio, cpu_ratio, kernel_ratio, bytes_per_row, bound_rate;
};

// bytes/row: what a sample moves if every row it touches comes from memory
// (kernels::wide_row_traffic); bound: the rows/s that traffic allows at the triad bandwidth;
// of_bound: the achieved fraction of it (above 1 where hot rows stay in the caches).
void print_header() {
  std::printf("%-4s %-10s %-10s %8s %12s %14s %8s %8s %9s %9s %9s %9s %12s %8s %8s\n", "model", "schema", "ids",
              "seconds", "samples/s", "nonzeros/s", "ratio", "cpu_s", "cpu_ratio", "kernel_s", "k_ratio", "bytes/row",
              "bound", "of_bound", "loss");
}

bench::CsvTable open_csv(const std::string& path) {
  return bench::CsvTable(path, {"model",
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
                                "train_logloss",
                                "load_1m",
                                "load_5m",
                                "load_15m",
                                "cpu_model"});
}

// Writes one row: the table line, the summary's four figures, the CSV row.
// Figures to 4 significant digits in the table (the CSV keeps them whole), the machine's load
// re-read beside each row.
void report(const std::string& name, const Case& cs, const Row& w, const kernels::WideShape& shape,
            const BenchData& data, const Options& o, double bandwidth, Json& summary, bench::CsvTable& csv) {
  const Run& r = w.run;
  const auto sig = [](double v) { return bench::significant(v); };
  std::printf("%-4s %-10s %-10s %8s %12s %14s %8s %8s %9s %9s %9s %9s %12s %8s %8s\n", name.c_str(), cs.schema, cs.ids,
              sig(r.seconds).c_str(), sig(w.rate).c_str(), sig(double(r.nonzeros) / r.seconds).c_str(),
              sig(w.ratio).c_str(), sig(r.cpu_seconds).c_str(), sig(w.cpu_ratio).c_str(), sig(r.kernel_seconds).c_str(),
              sig(w.kernel_ratio).c_str(), sig(w.bytes_per_row).c_str(), sig(w.bound_rate).c_str(),
              sig(w.rate / w.bound_rate).c_str(), sig(r.loss).c_str());
  std::fflush(stdout);
  const bench::Machine machine = bench::this_machine();
  const std::string key = name + "_" + cs.schema + "_" + cs.ids;
  summary[key + "_samples_per_s"] = w.rate;
  summary[key + "_cpu_ratio"] = w.cpu_ratio;
  summary[key + "_bound_samples_per_s"] = w.bound_rate;
  summary[key + "_bound_fraction"] = w.rate / w.bound_rate;
  csv.row({name,
           cs.schema,
           cs.ids,
           std::to_string(o.train.threads),
           std::to_string(data.original.rows()),
           std::to_string(data.original.num_features),
           std::to_string(shape.k),
           std::to_string(o.batch_size),
           csv_number(r.seconds),
           csv_number(w.rate),
           csv_number(double(r.nonzeros) / r.seconds),
           csv_number(w.ratio),
           csv_number(r.cpu_seconds),
           csv_number(w.cpu_ratio),
           csv_number(r.kernel_seconds),
           csv_number(w.kernel_ratio),
           csv_number(bandwidth / 1e9),
           csv_number(w.bytes_per_row),
           csv_number(w.bound_rate),
           csv_number(w.rate / w.bound_rate),
           csv_number(r.loss),
           csv_number(machine.load_1m),
           csv_number(machine.load_5m),
           csv_number(machine.load_15m),
           machine.cpu_model});
}

// One model's three cases: classical on the generator's ids, classical renumbered, flow.
void bench_model(kernels::WideKind kind, const BenchData& data, const Options& o, double bandwidth, Json& summary,
                 bench::CsvTable& csv) {
  const std::string name = kernels::wide_kind_name(kind);
  kernels::WideShape shape;
  shape.kind = kind;
  shape.num_features = data.original.num_features;
  shape.num_fields = data.original.num_fields;
  shape.k = shape.kind == kernels::WideKind::LR ? 0 : o.k;
  const std::vector<Case> cases{Case{"classical", "original", &data.original},
                                Case{"classical", "renumbered", &data.renumbered},
                                Case{"flow", "renumbered", &data.renumbered}};
  const std::vector<std::vector<Run>> runs = run_cases(cases, shape, o);
  double classical_rate = 0, classical_kernel = 0, classical_cpu = 0;
  TrainOptions train = o.train;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    Row w;
    w.run = median_run(runs[i]);
    const Run& r = w.run;
    w.rate = double(r.samples) / r.seconds;
    if (classical_rate == 0) classical_rate = w.rate;
    if (classical_kernel == 0) classical_kernel = r.kernel_seconds;
    if (classical_cpu == 0) classical_cpu = r.cpu_seconds;
    w.ratio = w.rate / classical_rate;
    w.cpu_ratio = classical_cpu / r.cpu_seconds;
    w.kernel_ratio = classical_kernel / r.kernel_seconds;
    train.schema = schema_from_name(cases[i].schema);
    w.bytes_per_row = kernels::wide_row_traffic(shape, data.entries_per_row, model_shaped_arrays(train, 1)).total();
    w.bound_rate = bandwidth / w.bytes_per_row;
    report(name, cases[i], w, shape, data, o, bandwidth, summary, csv);
  }
}

int run(const Options& o) {
  ReadOptions ro;
  ro.threads = o.train.threads;
  Timer load;
  BenchData data{load_dataset(o.data, ro), {}, 0};
  data.renumbered = data.original;
  FeatureOrder::by_frequency(feature_counts(data.original, data.original.num_features)).apply(data.renumbered);
  // 3 x 2^26 floats (768 MiB) against an LLC of tens of MiB, with the run's threads.
  const double bandwidth = triad_bandwidth(std::size_t(1) << 26, ro.threads);
  const SparseDataset& original = data.original;
  data.entries_per_row = double(original.nnz()) / double(std::max<std::int64_t>(1, original.rows()));
  SKEW_INFO("data: " << original.rows() << " rows, " << original.nnz() << " nonzeros, " << original.num_features
                     << " features (" << load.seconds() << " s); triad bandwidth " << bandwidth / 1e9 << " GB/s at "
                     << ro.threads << " threads");
  bench::CsvTable csv = open_csv(o.csv);
  const bench::Machine machine = bench::print_machine_header(o.train.threads);
  print_header();
  Json summary{{"app", "wide_bench"}, {"triad_GBps", bandwidth / 1e9}, {"machine", bench::machine_json(machine)}};
  for (const kernels::WideKind kind : o.models) bench_model(kind, data, o, bandwidth, summary, csv);
  print_summary(summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, make_schema(), false, bench::HelpFrom::EveryRank,
                         [](const Config& c, comm::Runtime&) { return run(read_options(c)); });
}
