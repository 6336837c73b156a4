// The benchmark apps' shared harness, as nccl-tests' mains sit on one common file: the median
// every app reports, timed repeats after warm-up runs, CSV tables written only where a path is
// given, and the skip without a GPU. Device memory is owned by DeviceOperand
// (apps/bench/device_operand.hpp, over skew::DeviceArray). The machine and its load beside each
// timing, with the load warning, are apps/bench/machine.hpp's; the printed figures' digits
// apps/bench/table.hpp's.
#pragma once
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/metrics.hpp"
#include "core/timer.hpp"
#include "mpi/runtime.hpp"

namespace skew::bench {

// Who answers --help and --print-config: every rank (the single-process benches, as before),
// or rank 0 alone (skew_commbench, launched on many ranks).
enum class HelpFrom { EveryRank, RankZero };

// A bench's main: MPI set up and errors reported as comm::run_main does (binding a GPU where
// `bind_gpu`), the command line and INI file parsed against `schema`, --help and
// --print-config answered, then `body(config, runtime)` runs; its value is the exit code.
template <class Body>
int run_main(int argc, char** argv, const Schema& schema, bool bind_gpu, HelpFrom help, Body body) {
  return comm::run_main(argc, argv, bind_gpu, [&](comm::Runtime& rt) {
    const Config config = Config::parse(schema, argc, argv);
    if (config.answer_help_or_print(std::cout, help == HelpFrom::EveryRank || rt.world_rank == 0)) return 0;
    return body(config, rt);
  });
}

// The middle sample (of an even count, the upper of the two middle ones): the figure every
// benchmark reports from its repeats.
double median(std::vector<double> samples);

// The median of one figure (`field`) over repeated runs' records.
template <class Record>
double median_of(const std::vector<Record>& runs, double Record::*field) {
  std::vector<double> samples;
  for (const Record& run : runs) samples.push_back(run.*field);
  return median(std::move(samples));
}

// Median wall milliseconds of `repeats` runs of `run`, after `warmups` untimed ones.
template <class Run>
double median_wall_ms(int warmups, int repeats, Run run) {
  for (int w = 0; w < warmups; ++w) run();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    Timer timer;
    run();
    ms.push_back(timer.seconds() * 1e3);
  }
  return median(std::move(ms));
}

// A CSV table at `path` with `columns`, or nothing where the path is empty (bench.csv = "").
class CsvTable {
 public:
  CsvTable(const std::string& path, const std::vector<std::string>& columns);
  explicit operator bool() const { return writer_ != nullptr; }
  // Appends a row where the table is written; nothing otherwise.
  void row(const std::vector<std::string>& cells);

 private:
  std::unique_ptr<CsvWriter> writer_;
};

// Where no CUDA device is present: prints "`app`: SKIPPED: no CUDA device (this build has|lacks
// CUDA)`note`", marks `summary` skipped, prints it, and returns true (the app then ends with 0).
bool skipped_without_gpu(const std::string& app, const std::string& note, Json& summary);

}  // namespace skew::bench
