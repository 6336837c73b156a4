// Threads in the wide trainer: the pool (which spins before it sleeps) runs every task once, and
// the flow schema, whose tiles are dealt out in chunks with a gradient replica or compact rows
// each, gives one result per thread count, run after run, that follows the classical run.
#include <sched.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "kernels/cpu/wide_scratch_row.hpp"
#include "kernels/wide_pool.hpp"
#include "lib/wide/trainer.hpp"
#include "tests/unit/wide_reference.hpp"

using namespace skew;
using namespace skew::wide;
using kernels::WideKind;

using namespace skew::wide::reference;

TEST_CASE("the wide pool runs every task exactly once, whether its threads spin or sleep between runs") {
  for (int threads : {2, 3}) {
    kernels::WidePool pool(threads);
    std::vector<std::atomic<int>> calls(64);
    std::atomic<int> bad_thread{0};
    for (int run = 0; run < 300; ++run) {
      // Task counts around the thread count (0, 1: the caller alone), and pauses longer than the
      // pool's spin so that the workers go to sleep and must be woken.
      const std::int64_t tasks = (run * 7) % 41;
      if (run % 60 == 59) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (auto& c : calls) c.store(0);
      pool.run(tasks, [&](std::int64_t task, int thread) {
        calls[std::size_t(task)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      });
      int wrong = 0;
      for (std::int64_t t = 0; t < 64; ++t) wrong += calls[std::size_t(t)].load() != (t < tasks ? 1 : 0);
      INFO("threads=" << threads << " run=" << run << " tasks=" << tasks);
      REQUIRE(wrong == 0);
    }
    CHECK(bad_thread.load() == 0);
  }
}

TEST_CASE("the wide pool's pinned runs give task t to thread t % threads, run after run, each task once") {
  // Pinned while every thread has a CPU (2 on a 2-CPU machine); beyond the process's CPUs a pool
  // claims pinned runs' tasks dynamically: each still runs once.
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cpus = CPU_COUNT(&set);
  for (int threads : {1, 2, 3, cpus + 1}) {
    kernels::WidePool pool(threads);
    CHECK(pool.pins() == (threads <= cpus));
    for (int run = 0; run < 200; ++run) {
      const std::int64_t tasks = (run * 5) % 8;  // fewer, as many and more tasks than threads
      if (run % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
      std::vector<std::atomic<int>> calls(8);
      std::atomic<int> wrong_thread{0};
      pool.run_pinned(tasks, [&](std::int64_t task, int thread) {
        calls[std::size_t(task)].fetch_add(1);
        if (pool.pins() && thread != task % threads) wrong_thread.fetch_add(1);
      });
      int wrong = 0;
      for (std::int64_t t = 0; t < 8; ++t) wrong += calls[std::size_t(t)].load() != (t < tasks ? 1 : 0);
      INFO("threads=" << threads << " run=" << run << " tasks=" << tasks);
      REQUIRE(wrong == 0);
      REQUIRE(wrong_thread.load() == 0);
    }
  }
}

TEST_CASE("the wide pool's runs see each other's writes: a running sum over 2000 short runs") {
  kernels::WidePool pool(3);
  std::vector<double> partial(8, 0.0);
  double total = 0;
  for (int run = 1; run <= 2000; ++run) {
    // Each task adds to its own slot what the previous run's total says: a lost or stale write
    // would change every later value.
    pool.run(8, [&](std::int64_t task, int) { partial[std::size_t(task)] = total * 1e-3 + double(task + run); });
    for (const double p : partial) total += p;
  }
  double ref = 0;  // the same sums, one thread
  for (int run = 1; run <= 2000; ++run) {
    const double before = ref;
    for (int task = 0; task < 8; ++task) ref += before * 1e-3 + double(task + run);
  }
  CHECK(total == ref);
}

namespace {

// Three epochs of 100-row steps over 600 rows (tiles of 16: 7 per step, so the chunks of 2 and
// 3 threads are uneven); the parameters at the end.
std::vector<float> train_flow(const Setup& s, int threads, TrainSchema schema) {
  TrainOptions o;
  o.schema = schema;
  o.classical_sync = ClassicalSync::Atomic;  // the mini-batch run
  o.threads = threads;
  o.optimizer.kind = OptimizerKind::AdaGrad;
  o.optimizer.lr = 0.05f;
  o.optimizer.l2 = 1e-3f;
  o.flow.tile_samples = 16;
  WideTrainer t(s.model, o);
  for (int epoch = 0; epoch < 3; ++epoch)
    for (std::int64_t b = 0; b < 600; b += 100) t.step(s.data, b, b + 100);
  const auto& params = t.parameters();
  return std::vector<float>(params.begin(), params.end());
}

}  // namespace

TEST_CASE("flow LR, FM and FFM: each thread count gives one result run after run, and all follow the classical run") {
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    const Setup s = make_setup(kind, 600);
    const std::vector<float> classical = train_flow(s, 1, TrainSchema::Classical);
    for (int threads : {1, 2, 3}) {
      const std::vector<float> first = train_flow(s, threads, TrainSchema::Flow);
      const std::vector<float> again = train_flow(s, threads, TrainSchema::Flow);
      INFO(kernels::wide_kind_name(kind) << " threads=" << threads);
      CHECK(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
      double worst = 0, moved = 0;
      for (std::size_t c = 0; c < first.size(); ++c) {
        worst = std::max(worst, double(std::fabs(first[c] - classical[c])));
        moved = std::max(moved, double(std::fabs(classical[c] - s.model.params[c])));
      }
      CHECK(moved > 0.01);
      CHECK(worst < 1e-4);
      // Feature 1999 is in no row of the 600: lazy L2 leaves its row alone.
      const std::size_t row = std::size_t(s.shape.row_len()), last = 1 + 1999 * row;
      CHECK(std::memcmp(first.data() + last, s.model.params.data() + last, row * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("flow FM: every thread count trains the 1-thread model bit for bit (each feature's sums in tile order)") {
  const Setup s = make_setup(WideKind::FM, 600);
  const std::vector<float> one = train_flow(s, 1, TrainSchema::Flow);
  for (int threads : {2, 3, 4}) {
    INFO("threads=" << threads);
    CHECK(std::memcmp(train_flow(s, threads, TrainSchema::Flow).data(), one.data(), one.size() * sizeof(float)) == 0);
  }
}

TEST_CASE(
    "a step's loss, its terms computed by the pool or the LR flow kernel, is logloss_sum over the batch bit for bit") {
  for (WideKind kind : {WideKind::LR, WideKind::FM, WideKind::FFM}) {
    const Setup s = make_setup(kind, 600);
    for (const char* schema : {"classical", "flow"}) {
      TrainOptions o;
      o.schema = schema_from_name(schema);
      o.classical_sync = ClassicalSync::Atomic;
      o.threads = 3;
      o.flow.tile_samples = 16;
      WideTrainer t(s.model, o);
      std::vector<float> grad, logits;
      t.gradient(s.data, 0, 600, grad, logits);  // the logits the step will see; no update
      const double expect = logloss_sum(logits.data(), s.data.label.data(), 600) / 600.0;
      INFO(kernels::wide_kind_name(kind) << " " << schema);
      CHECK(expect > 0.1);
      CHECK(t.step(s.data, 0, 600).loss == expect);
    }
  }
}

TEST_CASE("a kernel's scratch row has its latent part on a cache line, inside its storage, at every misalignment") {
  // Storage starting at each 4-byte offset within a line (and a page boundary ahead): the row
  // must fit in the row's length plus the slack, and its second float must start a line.
  constexpr std::size_t row_len = 17;
  alignas(4096) static float buffer[2 * 4096 / sizeof(float)];
  for (std::size_t offset = 0; offset < 64 / sizeof(float); ++offset)
    for (std::size_t page_end : {std::size_t(0), 4096 / sizeof(float) - 16}) {
      float* storage = buffer + page_end + offset;
      const float* row = kernels::wide_row_with_latent_on_line(storage);
      INFO("offset " << offset << " near the page's end " << page_end);
      REQUIRE(row >= storage);
      REQUIRE(row + row_len <= storage + row_len + kernels::kWideScratchRowSlack);
      REQUIRE(reinterpret_cast<std::uintptr_t>(row + 1) % 64 == 0);
    }
}

TEST_CASE("a fused flow step (the kernel applies the optimizer) is the separate optimizer step bit for bit") {
  for (const char* opt : {"sgd", "adagrad", "ftrl"}) {
    for (int threads : {1, 2, 3}) {
      const Setup s = make_setup(WideKind::LR, 600);
      const TrainOptions o = lr_test_options(TrainSchema::Flow, opt, threads);
      WideTrainer fused(s.model, o), separate(s.model, o);
      REQUIRE(fused.flow()->fuses_update());
      // The separate run: the flow gradient alone, then the optimizer over the batch's features.
      std::vector<float> params = copy_to_vector(s.model.params);
      Optimizer optimizer(o.optimizer, s.shape, params);
      kernels::WidePool pool(threads);
      for (int epoch = 0; epoch < 2; ++epoch)
        for (std::int64_t b = 0; b < 600; b += 100) {
          fused.step(s.data, b, b + 100);
          separate.set_parameters(params);
          std::vector<float> grad, logits;
          separate.gradient(s.data, b, b + 100, grad, logits);
          std::vector<std::uint32_t> touched(s.data.index.begin() + s.data.row_ptr[std::size_t(b)],
                                             s.data.index.begin() + s.data.row_ptr[std::size_t(b + 100)]);
          std::sort(touched.begin(), touched.end());
          touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
          optimizer.step(params.data(), grad.data(), touched, 1.0f / 100.0f, pool);
        }
      INFO(opt << " threads=" << threads);
      double moved = 0;
      for (std::size_t c = 0; c < params.size(); ++c)
        moved = std::max(moved, double(std::fabs(params[c] - s.model.params[c])));
      CHECK(moved > 0.01);
      CHECK(std::memcmp(copy_to_vector(fused.parameters()).data(), params.data(), params.size() * sizeof(float)) == 0);
    }
  }
}

namespace {

// Spins until this thread has used `seconds` more CPU time.
void burn_cpu(double seconds) {
  const double until = kernels::thread_cpu_seconds() + seconds;
  while (kernels::thread_cpu_seconds() < until) {
  }
}

}  // namespace

TEST_CASE("a profiled wide pool times each pass of a step: its wall time, and each thread's CPU time in its tasks") {
  kernels::WidePool pool(2, "train.threads", true);
  if (!pool.pins()) {  // one CPU: the pinned run's tasks may go to either thread
    WARN("not tried: the process has one CPU");
    return;
  }
  constexpr int kSteps = 3;
  for (int step = 0; step < kSteps; ++step) {
    pool.run(2, [](std::int64_t, int) { burn_cpu(0.002); });  // outside a step: not a pass
    pool.mark_step();
    // Pass 0: thread 0 burns 2 ms, thread 1 6 ms; pass 1: one task, the caller's, 1 ms.
    pool.run_pinned(2, [](std::int64_t task, int) { burn_cpu(task == 0 ? 0.002 : 0.006); });
    pool.run(1, [](std::int64_t, int) { burn_cpu(0.001); });
    pool.end_step();
  }
  const std::vector<kernels::WidePoolPass>& passes = pool.passes();
  REQUIRE(passes.size() == 2);
  const double slack = 0.001 * kSteps;  // a burn overshoots by a clock read, not by a millisecond
  const double expect[2][2] = {{0.002 * kSteps, 0.006 * kSteps}, {0.001 * kSteps, 0}};
  for (std::size_t p = 0; p < 2; ++p) {
    INFO("pass " << p);
    CHECK(passes[p].runs == kSteps);
    REQUIRE(passes[p].cpu_seconds.size() == 2);
    for (std::size_t t = 0; t < 2; ++t) {
      CHECK(passes[p].cpu_seconds[t] >= expect[p][t]);
      CHECK(passes[p].cpu_seconds[t] <= expect[p][t] + slack);
      // The caller waits for every thread: a run's wall time covers each thread's CPU time in it.
      CHECK(passes[p].wall_seconds >= passes[p].cpu_seconds[t]);
    }
  }
}

TEST_CASE("train.profile times every step's pool passes and trains the unprofiled model bit for bit") {
  const Setup s = make_setup(WideKind::FM, 600);
  std::vector<float> params[2];
  for (const bool profile : {false, true}) {
    TrainOptions o;
    o.threads = 2;
    o.profile = profile;
    o.optimizer.kind = OptimizerKind::AdaGrad;
    o.optimizer.lr = 0.05f;
    o.flow.tile_samples = 16;
    WideTrainer t(s.model, o);
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (std::int64_t b = 0; b < 600; b += 100) t.step(s.data, b, b + 100);
      t.evaluate(s.data);  // the pool's runs between steps are no pass
    }
    const StepProfile p = t.profile();
    params[profile] = copy_to_vector(t.parameters());
    if (!profile) {
      CHECK(p.steps == 0);
      CHECK(p.passes.empty());
      continue;
    }
    CHECK(p.steps == 18);
    REQUIRE(p.passes.size() >= 2);  // FM's sample and feature passes, then the loss terms'
    double in_passes = 0;
    for (const kernels::WidePoolPass& pass : p.passes) {
      CHECK(pass.runs == 18);
      REQUIRE(pass.cpu_seconds.size() == 2);
      CHECK(pass.wall_seconds >= std::max(pass.cpu_seconds[0], pass.cpu_seconds[1]));
      in_passes += pass.wall_seconds;
    }
    CHECK(p.passes[0].cpu_seconds[1] > 0);  // the sample pass's second chunk, on the worker
    CHECK(p.step_seconds >= in_passes);
  }
  CHECK(std::memcmp(params[0].data(), params[1].data(), params[0].size() * sizeof(float)) == 0);
}
