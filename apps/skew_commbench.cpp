// skew_commbench: nccl-tests-style bandwidth table for allreduce and alltoallv over a
// ProcessGroup (MPI on host buffers, or NCCL on device buffers), sizes doubling from
// bench.min_bytes to bench.max_bytes. Every size is first run once on rank-dependent data and
// checked against the closed form (#wrong), then timed. algbw = size / time; busbw scales it
// by the nccl-tests factors: allreduce 2(n-1)/n, alltoall(v) (n-1)/n.
//   mpirun -np 2 skew_commbench [--config configs/commbench.ini] [--bench.backend=nccl] ...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "apps/bench/harness.hpp"
#include "apps/bench/machine.hpp"
#include "apps/bench/table.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/tensor.hpp"
#include "core/timer.hpp"
#include "mpi/runtime.hpp"

namespace {

using skew::comm::ProcessGroup;
using skew::comm::ReduceOp;

skew::Schema make_schema() {
  skew::Schema s("skew_commbench",
                 "Bandwidth of allreduce and alltoallv over a process group (nccl-tests style table).");
  s.add_choice("bench.op", "all", {"all", "allreduce", "alltoallv"}, "collective(s) to measure")
      .add_choice("bench.backend", "mpi", {"mpi", "nccl"}, "process group: mpi (host buffers) or nccl (GPU buffers)")
      .add_choice("bench.dtype", "float", {"float", "double", "int32", "int64"}, "element type")
      .add_choice("bench.redop", "sum", {"sum", "avg", "max", "min"}, "reduction of allreduce")
      .add_int("bench.min_bytes", 8, {1, 1LL << 40}, "smallest message size in bytes (rounded down to whole elements)")
      .add_int("bench.max_bytes", 64 << 20, {1, 1LL << 40}, "largest message size in bytes")
      .add_int("bench.step_factor", 2, {2, 1024}, "size multiplier between rows")
      .add_int("bench.iters", 20, {1, 1 << 20}, "timed iterations per size")
      .add_int("bench.warmup", 5, {0, 1 << 20}, "untimed iterations per size before timing")
      .add_float("bench.alltoallv_zipf", 0.0, skew::FloatRange::at_least(0),
                 "alltoallv skew: every rank sends share (p+1)^-s of its data to rank p (0 = even split; MoE traffic "
                 "to a hot expert's rank is s > 0)")
      .add_bool("bench.check", true, "check each size's result against the closed form (#wrong)")
      .add_string("output.csv", "",
                  "CSV of the table, e.g. out/commbench_np{ranks}_{device}.csv ({ranks}, {backend}, {device} are "
                  "substituted; empty: none, the table is printed)")
      .add_string("output.metrics", "", "JSONL file with one object per row (empty: none)");
  return s;
}

struct Row {
  std::string collective;
  std::size_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = 0;
};

struct Bench {
  std::shared_ptr<ProcessGroup> group;  // the measured backend
  std::shared_ptr<ProcessGroup> world;  // MPI world, for bookkeeping (times, wrong counts)
  skew::Device device = skew::Device::Host;
  skew::DType dtype = skew::DType::F32;
  ReduceOp redop = ReduceOp::Sum;
  std::int64_t iters = 0, warmup = 0;
  double alltoallv_zipf = 0;
  bool check = true;
};

// Element i of rank r's allreduce input, and the closed-form result over n ranks.
double allreduce_input(int r, std::size_t i) {
  return (r + 1) + static_cast<double>(i % 13);
}
double allreduce_expected(ReduceOp op, int n, std::size_t i, bool integer) {
  const double m = static_cast<double>(i % 13);
  const double sum = n * (n + 1) / 2.0 + n * m;
  switch (op) {
    case ReduceOp::Sum: return sum;
    case ReduceOp::Avg: return integer ? std::floor(sum / n) : sum / n;
    case ReduceOp::Max: return n + m;
    case ReduceOp::Min: return 1 + m;
  }
  return sum;
}
// Element j of the block rank `from` sends to rank `to` (small integers: exact in every dtype).
double alltoall_value(int from, int to, std::size_t j) {
  return static_cast<double>((from * 7 + to * 3 + j) % 1024);
}

skew::Tensor host_tensor(std::size_t count, skew::DType dtype, const std::vector<double>& values) {
  skew::Tensor t = skew::Tensor::empty({static_cast<std::int64_t>(std::max<std::size_t>(count, 1))}, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case skew::DType::F32: t.data<float>()[i] = static_cast<float>(values[i]); break;
      case skew::DType::F64: t.data<double>()[i] = values[i]; break;
      case skew::DType::I32: t.data<std::int32_t>()[i] = static_cast<std::int32_t>(values[i]); break;
      case skew::DType::I64: t.data<std::int64_t>()[i] = static_cast<std::int64_t>(values[i]); break;
      default: SKEW_THROW("bench.dtype " << skew::dtype_name(dtype) << " is not supported");
    }
  }
  return t;
}

std::int64_t count_wrong(const skew::Tensor& device_result, std::size_t count, const std::vector<double>& expected) {
  const std::vector<float> got = device_result.to(skew::Device::Host).to_float_vector();
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (std::fabs(got[i] - expected[i]) > 1e-6 * std::max(1.0, std::fabs(expected[i]))) ++wrong;
  return wrong;
}

// Mean time per iteration of `op` on this rank, then averaged over ranks (as nccl-tests does).
template <typename Op>
double time_us(const Bench& b, const Op& op) {
  for (std::int64_t i = 0; i < b.warmup; ++i) op();
  b.group->barrier();
  skew::Timer timer;
  for (std::int64_t i = 0; i < b.iters; ++i) op();
  std::vector<double> t{timer.seconds() * 1e6 / static_cast<double>(b.iters)};
  b.world->allreduce(skew::comm::view(t), ReduceOp::Avg);
  return t[0];
}

std::int64_t total_wrong(const Bench& b, std::int64_t mine) {
  std::vector<std::int64_t> w{mine};
  b.world->allreduce(skew::comm::view(w), ReduceOp::Sum);
  return w[0];
}

Row run_allreduce(const Bench& b, std::size_t count) {
  const int n = b.group->size(), r = b.group->rank();
  const bool integer = b.dtype == skew::DType::I32 || b.dtype == skew::DType::I64;
  Row row{"allreduce", count * skew::dtype_size(b.dtype), count};
  if (b.check) {
    std::vector<double> input(count), expected(count);
    for (std::size_t i = 0; i < count; ++i) {
      input[i] = allreduce_input(r, i);
      expected[i] = allreduce_expected(b.redop, n, i, integer);
    }
    skew::Tensor buf = host_tensor(count, b.dtype, input).to(b.device);
    skew::comm::Buffer v = skew::comm::view(buf);
    v.count = count;
    b.group->allreduce(v, b.redop);
    row.wrong = total_wrong(b, count_wrong(buf, count, expected));
  }
  // Timed runs reduce in place over and over, so they use a fixed point of the reduction (0 for
  // sums, 1 otherwise): values neither overflow nor turn denormal however many iterations run.
  const double fixed = b.redop == ReduceOp::Sum ? 0.0 : 1.0;
  skew::Tensor buf = host_tensor(count, b.dtype, std::vector<double>(count, fixed)).to(b.device);
  skew::comm::Buffer v = skew::comm::view(buf);
  v.count = count;
  row.time_us = time_us(b, [&] { b.group->allreduce(v, b.redop); });
  row.algbw = static_cast<double>(row.bytes) / (row.time_us * 1e3);
  row.busbw = row.algbw * 2.0 * (n - 1) / n;
  return row;
}

// `count` elements per rank split over the n destinations by weight (p+1)^-zipf, rounded by
// largest remainder so the shares sum to `count` exactly (zipf = 0: as even as possible, the
// first peers taking the remainder). When count < n some peers get nothing, which the v-form allows.
std::vector<std::size_t> alltoallv_shares(std::size_t count, int n, double zipf) {
  std::vector<double> exact(static_cast<std::size_t>(n));
  double total_weight = 0;
  for (int p = 0; p < n; ++p) total_weight += std::pow(p + 1.0, -zipf);
  std::vector<std::size_t> shares(static_cast<std::size_t>(n));
  std::size_t assigned = 0;
  for (int p = 0; p < n; ++p) {
    const auto i = static_cast<std::size_t>(p);
    exact[i] = static_cast<double>(count) * std::pow(p + 1.0, -zipf) / total_weight;
    shares[i] = static_cast<std::size_t>(std::floor(exact[i]));
    assigned += shares[i];
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) order[static_cast<std::size_t>(p)] = p;
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
    const auto ia = static_cast<std::size_t>(a), ic = static_cast<std::size_t>(c);
    return exact[ia] - std::floor(exact[ia]) > exact[ic] - std::floor(exact[ic]) + 1e-12;
  });
  for (std::size_t k = 0; assigned < count; ++k, ++assigned)
    ++shares[static_cast<std::size_t>(order[k % order.size()])];
  return shares;
}

Row run_alltoallv(const Bench& b, std::size_t count) {
  const int n = b.group->size(), r = b.group->rank();
  // Every rank uses the same split, so rank r sends shares[p] to p and receives shares[r] from everyone.
  const std::vector<std::size_t> counts = alltoallv_shares(count, n, b.alltoallv_zipf);
  const auto share = [&](int peer) { return counts[static_cast<std::size_t>(peer)]; };
  std::vector<std::size_t> recv_counts(static_cast<std::size_t>(n), share(r));
  const std::size_t recv_total = skew::comm::sum_counts(recv_counts);
  std::vector<double> input, expected;
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < share(p); ++j) input.push_back(alltoall_value(r, p, j));
  for (int p = 0; p < n; ++p)
    for (std::size_t j = 0; j < share(r); ++j) expected.push_back(alltoall_value(p, r, j));
  skew::Tensor send = host_tensor(count, b.dtype, input).to(b.device);
  skew::Tensor recv =
      skew::Tensor::zeros({static_cast<std::int64_t>(std::max<std::size_t>(recv_total, 1))}, b.dtype, b.device);
  const skew::comm::Buffer sv = skew::comm::view(send), rv = skew::comm::view(recv);
  Row row{"alltoallv", count * skew::dtype_size(b.dtype), count};
  if (b.check) {
    b.group->alltoallv(sv, counts, rv, recv_counts);
    row.wrong = total_wrong(b, count_wrong(recv, recv_total, expected));
  }
  row.time_us = time_us(b, [&] { b.group->alltoallv(sv, counts, rv, recv_counts); });
  row.algbw = static_cast<double>(row.bytes) / (row.time_us * 1e3);
  // Bus bandwidth = bytes the busiest receiver takes from other ranks / time: the link that
  // bounds the exchange. For an even split it is nccl-tests' algbw * (n-1)/n.
  const std::size_t busiest_share = *std::max_element(counts.begin(), counts.end());
  const double busiest_bytes =
      static_cast<double>(busiest_share * static_cast<std::size_t>(n - 1) * skew::dtype_size(b.dtype));
  row.busbw = busiest_bytes / (row.time_us * 1e3);
  return row;
}

std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// The run's settings, typed once from the Config (the key text kept where the table prints it).
struct Options {
  std::string backend, dtype_text, redop_text;
  std::vector<std::string> collectives;  // allreduce and/or alltoallv, in that order
  std::int64_t min_bytes, max_bytes, step;
  Bench bench;  // iters, warmup, check, zipf, dtype, redop; groups and device set by the run
  std::string csv_template, metrics;
};

Options read_options(const skew::Config& config) {
  Options o;
  o.backend = config.get_string("bench.backend");
  o.dtype_text = config.get_string("bench.dtype");
  o.redop_text = config.get_string("bench.redop");
  const std::string which = config.get_string("bench.op");
  if (which != "alltoallv") o.collectives.push_back("allreduce");
  if (which != "allreduce") o.collectives.push_back("alltoallv");
  const std::int64_t min_bytes = config.get_int("bench.min_bytes"), max_bytes = config.get_int("bench.max_bytes");
  o.min_bytes = min_bytes;
  o.max_bytes = max_bytes;
  o.step = config.get_int("bench.step_factor");
  Bench& b = o.bench;
  b.iters = config.get_int("bench.iters");
  b.warmup = config.get_int("bench.warmup");
  b.check = config.get_bool("bench.check");
  b.alltoallv_zipf = config.get_float("bench.alltoallv_zipf");
  SKEW_CHECK(max_bytes >= min_bytes,
             "bench.min_bytes (" << min_bytes << ") must be <= bench.max_bytes (" << max_bytes << ")");
  b.dtype = o.dtype_text == "float"    ? skew::DType::F32
            : o.dtype_text == "double" ? skew::DType::F64
            : o.dtype_text == "int32"  ? skew::DType::I32
                                       : skew::DType::I64;
  b.redop = o.redop_text == "sum"   ? ReduceOp::Sum
            : o.redop_text == "avg" ? ReduceOp::Avg
            : o.redop_text == "max" ? ReduceOp::Max
                                    : ReduceOp::Min;
  o.csv_template = config.get_string("output.csv");
  o.metrics = config.get_string("output.metrics");
  return o;
}

// The '#' metadata lines above the tables (rank 0), the machine and its load among them (with a
// warning where the load exceeds the cores the `local_ranks` leave free).
skew::bench::Machine print_header(const Options& o, int local_ranks) {
  const Bench& b = o.bench;
  const int n = b.group->size();
  const skew::bench::Machine machine = skew::bench::print_machine_header(local_ranks);
  std::printf("# skew_commbench: %s backend, %d ranks, dtype %s, redop %s\n", o.backend.c_str(), n,
              o.dtype_text.c_str(), o.redop_text.c_str());
  std::printf(
      "# sizes %lld..%lld B (x%lld), %lld warmup + %lld timed iterations; time = mean per iteration, averaged over "
      "ranks\n",
      static_cast<long long>(o.min_bytes), static_cast<long long>(o.max_bytes), static_cast<long long>(o.step),
      static_cast<long long>(b.warmup), static_cast<long long>(b.iters));
  std::printf(
      "# busbw = algbw * 2(n-1)/n for allreduce; for alltoallv, bytes the busiest rank receives from others / time"
      " (split (p+1)^-%g); #wrong: elements off the closed form%s\n",
      b.alltoallv_zipf, b.check ? "" : " (check disabled: -1)");
  for (int r = 0; r < n; ++r) std::printf("#  rank %2d  world rank %2d\n", r, b.group->world_rank_of(r));
  return machine;
}

// Where the rows go: the table and CSV on rank 0, the JSONL metrics.
struct Outputs {
  bool root;
  skew::bench::CsvTable csv;
  skew::JsonlWriter metrics;
  skew::bench::Machine machine;  // its load re-read beside every row
};

// A collective's busbw summed over its rows, and the rows.
struct CollectiveTotals {
  double busbw = 0;
  int rows = 0;
  std::int64_t wrong = 0;
};

void write_row(const Options& o, const std::string& collective, const std::string& redop, const Row& row,
               std::int64_t wrong, Outputs& out) {
  using skew::bench::significant;
  const std::string ranks = std::to_string(o.bench.group->size());
  std::printf(" %12zu %12zu %8s %6s %10s %8s %8s %7lld\n", row.bytes, row.count, o.dtype_text.c_str(), redop.c_str(),
              significant(row.time_us).c_str(), significant(row.algbw).c_str(), significant(row.busbw).c_str(),
              static_cast<long long>(wrong));
  std::fflush(stdout);
  skew::bench::refresh_load(out.machine);
  const skew::bench::Machine& m = out.machine;
  out.csv.row({collective, o.backend, ranks, std::to_string(row.bytes), std::to_string(row.count), o.dtype_text, redop,
               skew::csv_number(row.time_us), skew::csv_number(row.algbw), skew::csv_number(row.busbw),
               std::to_string(wrong), skew::csv_number(m.load_1m), skew::csv_number(m.load_5m),
               skew::csv_number(m.load_15m), m.cpu_model});
  skew::Json record{
      {"collective", collective}, {"size_bytes", row.bytes}, {"count", row.count}, {"time_us", row.time_us},
      {"algbw_gbps", row.algbw},  {"busbw_gbps", row.busbw}, {"wrong", wrong}};
  record.update(skew::bench::machine_json(m));
  out.metrics.write(record);
}

// One collective's table: every size from bench.min_bytes to bench.max_bytes.
CollectiveTotals bench_collective(const Options& o, const std::string& collective, Outputs& out) {
  const Bench& b = o.bench;
  const std::string redop = collective == "allreduce" ? o.redop_text : "none";
  if (out.root) {
    std::printf("#\n# %s\n#%12s %12s %8s %6s %10s %8s %8s %7s\n", collective.c_str(), "size", "count", "type", "redop",
                "time", "algbw", "busbw", "#wrong");
    std::printf("#%12s %12s %8s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  CollectiveTotals totals;
  std::size_t last_count = 0;
  for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step) {
    const std::size_t count = std::max<std::size_t>(1, static_cast<std::size_t>(bytes) / skew::dtype_size(b.dtype));
    if (count == last_count) continue;  // several sizes below one element round to the same row
    last_count = count;
    const Row row = collective == "allreduce" ? run_allreduce(b, count) : run_alltoallv(b, count);
    const std::int64_t wrong = b.check ? row.wrong : -1;
    totals.wrong += std::max<std::int64_t>(wrong, 0);
    totals.busbw += row.busbw;
    ++totals.rows;
    if (out.root) write_row(o, collective, redop, row, wrong, out);
  }
  if (out.root)
    std::printf("#   %s avg bus bandwidth: %s GB/s\n", collective.c_str(),
                skew::bench::significant(totals.busbw / std::max(totals.rows, 1)).c_str());
  return totals;
}

// Every collective's table on the measured backend, then the totals; exit code 2 if any row was off.
int run(Options o, skew::comm::Runtime& rt) {
  Bench& b = o.bench;
  b.world = rt.world;
  b.group =
      skew::comm::make_world_group(rt, o.backend == "nccl" ? skew::comm::Backend::Nccl : skew::comm::Backend::Mpi);
  b.device = o.backend == "nccl" ? skew::Device::Cuda : skew::Device::Host;
  const int n = b.group->size();
  const std::string csv_path =
      substitute(substitute(substitute(o.csv_template, "{ranks}", std::to_string(n)), "{backend}", o.backend),
                 "{device}", o.backend == "nccl" ? "gpu" : "cpu");
  const bool root = rt.world_rank == 0;
  const skew::bench::Machine machine = root ? print_header(o, rt.local_size) : skew::bench::Machine{};
  Outputs out{root,
              skew::bench::CsvTable(root ? csv_path : "", {"collective", "backend", "ranks", "size_bytes", "count",
                                                           "type", "redop", "time_us", "algbw_gbps", "busbw_gbps",
                                                           "wrong", "load_1m", "load_5m", "load_15m", "cpu_model"}),
              skew::JsonlWriter(root ? o.metrics : ""), machine};
  skew::Json summary{{"app", "skew_commbench"},
                     {"backend", o.backend},
                     {"ranks", n},
                     {"dtype", o.dtype_text},
                     {"alltoallv_zipf", b.alltoallv_zipf},
                     {"machine", skew::bench::machine_json(machine)}};
  CollectiveTotals all;
  for (const std::string& collective : o.collectives) {
    const CollectiveTotals t = bench_collective(o, collective, out);
    summary[collective + "_avg_busbw_gbps"] = t.busbw / std::max(t.rows, 1);
    all.busbw += t.busbw, all.rows += t.rows, all.wrong += t.wrong;
  }
  if (root) {
    std::printf("#\n# Out of bounds values : %lld %s\n", static_cast<long long>(all.wrong),
                all.wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %s\n#\n",
                skew::bench::significant(all.busbw / std::max(all.rows, 1)).c_str());
    summary["avg_busbw_gbps"] = all.busbw / std::max(all.rows, 1);
    summary["wrong"] = all.wrong;
    summary["csv"] = csv_path;
    skew::print_summary(summary);
  }
  return all.wrong == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  return skew::bench::run_main(
      argc, argv, make_schema(), /*bind_gpu=*/true, skew::bench::HelpFrom::RankZero,
      [](const skew::Config& config, skew::comm::Runtime& rt) { return run(read_options(config), rt); });
}
