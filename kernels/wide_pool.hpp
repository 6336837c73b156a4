// A small persistent thread pool for the wide kernels: run(tasks, fn) calls fn(task, thread)
// for every task in [0, tasks), tasks claimed dynamically, and returns when all are done;
// run_pinned(tasks, fn) runs task t on thread t.
// One pool lives as long as a trainer so a mini-batch does not pay for thread start-up.
//
// A profiled pool (train.profile) times the runs between mark_step() and end_step(): the n-th
// run after mark_step() is the step's pass n, whose wall time (the caller's: hand-offs and waits
// included) and each thread's CPU time in its tasks (CLOCK_THREAD_CPUTIME_ID, which does not count
// time a thread was descheduled) add up in passes(). A pass's wall time over its busiest thread's
// CPU time is what the threads waited, for each other, the hand-offs or a CPU.
//
// A training step hands work to the pool three or four times, and a 2-thread LR step lasts about
// a quarter of a millisecond: a hand-off through a sleeping thread (futex wake, the scheduler running the
// thread, a futex wake back) costs 50-100 us on this VM, a spin on an atomic about a cache-line
// transfer. So both sides spin for a while before they sleep: the workers on the generation
// that announces the next run, the caller on the count of workers still busy. The
// wake-up syscall is made only when the other side went to sleep (Dekker-style: each side
// publishes, then checks the other's flag, all seq_cst). Bounded spins keep an idle pool
// (between epochs, during validation) off the cores.
#pragma once
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/thread_limits.hpp"

namespace skew::kernels {

// The CPUs this process may run on: its affinity mask (a Slurm allocation or taskset, not the
// machine's count).
inline int process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : std::numeric_limits<int>::max();
}

// One pass of a profiled pool's steps (see above), summed over the steps.
struct WidePoolPass {
  std::int64_t runs = 0;
  double wall_seconds = 0;
  std::vector<double> cpu_seconds;  // per thread, the caller's first
};

// The calling thread's CPU time in seconds.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

class WidePool {
 public:
  // `count_key` names the setting of `threads` for the error when a thread cannot be started;
  // `profiled`: the runs between mark_step() and end_step() are timed (passes()).
  explicit WidePool(int threads, const char* count_key = "train.threads", bool profiled = false)
      : threads_(threads < 1 ? 1 : threads),
        pins_(threads_ <= process_cpus()),
        profiled_(profiled),
        task_cpu_(profiled ? std::size_t(threads_) : 0) {
    try {
      for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
    } catch (const std::system_error& e) {
      // The threads started must be joined before the vector goes, or std::terminate.
      stop_workers();
      throw Error(thread_start_failure(count_key, int(workers_.size()) + 1, threads_, e));
    }
  }
  ~WidePool() { stop_workers(); }
  WidePool(const WidePool&) = delete;
  WidePool& operator=(const WidePool&) = delete;

  int threads() const { return threads_; }

  void run(std::int64_t tasks, const std::function<void(std::int64_t task, int thread)>& fn) {
    dispatch(tasks, false, fn);
  }

  // Runs task t on thread t % threads() (the caller is thread 0), the same thread run after run:
  // for work on data that the same task left in its thread's cache in an earlier run, such as
  // the rows a feature's owner updates every step. A descheduled thread is waited for, not
  // covered for, so a pool with more threads than the process may run on at once (pins() false)
  // runs them as run() does: LR's pinned passes ran 0.88-0.92x unpinned at 4 threads on 2 CPUs.
  void run_pinned(std::int64_t tasks, const std::function<void(std::int64_t task, int thread)>& fn) {
    dispatch(tasks, pins_, fn);
  }
  // Whether run_pinned keeps each task on its thread: every thread has a CPU of the process's own
  // (process_cpus()).
  bool pins() const { return pins_; }

  // A profiled pool's step: the runs from mark_step() to end_step() are its passes, in order.
  void mark_step() { pass_ = 0; }
  void end_step() { pass_ = kNoStep; }
  const std::vector<WidePoolPass>& passes() const { return passes_; }

 private:
  static constexpr std::size_t kNoStep = ~std::size_t(0);

  void dispatch(std::int64_t tasks, bool pinned, const std::function<void(std::int64_t, int)>& fn) {
    if (!profiled_) return execute(tasks, pinned, fn);
    if (pass_ == kNoStep) {  // a run outside the steps (validation): not a pass
      execute(tasks, pinned, fn);
      for (TaskCpu& t : task_cpu_) t.seconds = 0;
      return;
    }
    const auto begin = std::chrono::steady_clock::now();
    execute(tasks, pinned, fn);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (passes_.size() <= pass_) passes_.resize(pass_ + 1, WidePoolPass{0, 0, std::vector<double>(task_cpu_.size())});
    WidePoolPass& pass = passes_[pass_++];
    ++pass.runs;
    pass.wall_seconds += wall;
    for (std::size_t t = 0; t < task_cpu_.size(); ++t) pass.cpu_seconds[t] += std::exchange(task_cpu_[t].seconds, 0.0);
  }
  void execute(std::int64_t tasks, bool pinned, const std::function<void(std::int64_t, int)>& fn) {
    if (threads_ == 1 || tasks <= 1) {
      const double cpu = profiled_ ? thread_cpu_seconds() : 0;
      for (std::int64_t i = 0; i < tasks; ++i) fn(i, 0);
      if (profiled_) task_cpu_[0].seconds = thread_cpu_seconds() - cpu;
      return;
    }
    start(tasks, pinned, fn);
  }
  void stop_workers() {
    stop_.store(true);
    announce();
    for (auto& w : workers_) w.join();
  }
  void start(std::int64_t tasks, bool pinned, const std::function<void(std::int64_t, int)>& fn) {
    fn_ = &fn;
    tasks_ = tasks;
    pinned_ = pinned;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(threads_ - 1, std::memory_order_relaxed);
    announce();  // seq_cst: the stores above happen before any worker sees the new generation
    drain(0);
    wait_while_nonzero(busy_, caller_sleeping_);
    fn_ = nullptr;
  }

  // How long a side spins before it sleeps: longer than a wake-up through the kernel costs on a
  // VM (50-100 us measured here), so a hand-off within a step never sleeps. The spin yields the
  // core every kPollsPerYield polls: when another process shares the cores, the side waited for
  // (or that process) runs instead of the spinner. The budget used to adapt (doubled on a
  // success, reset to 1 us on a timeout), but once one side slept, the other's wait included a
  // wake-up, timed out in turn, and both stayed asleep for good: every hand-off then cost a
  // wake-up, 2.6x the ideal time of a loop of 5 us serial gaps and 50 us tasks on 2 idle cores
  // (this fixed, yielding spin: 1.1x; beside a CPU-bound process no slower than the adaptive one).
  static constexpr std::int64_t kSpinNs = 200000;
  static constexpr int kPollsPerYield = 64;

  // Not the PAUSE instruction: a VM's hypervisor takes a run of PAUSEs for a spin on a lock held
  // by a descheduled vCPU and deschedules the spinner (pause-loop exiting). On this project's
  // 2-vCPU VM that made a 2-thread LR epoch 4-5x slower than not spinning at all; plain reloads of
  // the atomic (a compiler barrier between them) spin without a VM exit.
  static void pause() { asm volatile("" ::: "memory"); }

  // Spins until `pred` holds or kSpinNs passes; true when it holds.
  template <typename Pred>
  static bool spin_until(Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kSpinNs);
    for (int i = 1;; ++i) {
      if (pred()) return true;
      pause();
      if (i % kPollsPerYield == 0) {
        if (std::chrono::steady_clock::now() > deadline) return pred();
        sched_yield();
      }
    }
  }

  void announce() {
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) generation_.notify_all();
  }

  // The caller's wait for the workers: `count` reaches zero (the last worker wakes it if
  // `sleeping` is set).
  void wait_while_nonzero(std::atomic<int>& count, std::atomic<bool>& sleeping) {
    if (spin_until([&] { return count.load(std::memory_order_acquire) == 0; })) return;
    sleeping.store(true);
    for (int c = count.load(); c != 0; c = count.load()) count.wait(c);
    sleeping.store(false);
  }

  void drain(int thread) {
    if (!profiled_) return drain_tasks(thread);
    const double cpu = thread_cpu_seconds();
    drain_tasks(thread);
    task_cpu_[std::size_t(thread)].seconds = thread_cpu_seconds() - cpu;
  }
  void drain_tasks(int thread) {
    if (pinned_) {
      for (std::int64_t i = thread; i < tasks_; i += threads_) (*fn_)(i, thread);
      return;
    }
    for (std::int64_t i = next_.fetch_add(1); i < tasks_; i = next_.fetch_add(1)) (*fn_)(i, thread);
  }

  void worker(int thread) {
    std::uint32_t seen = 0;
    for (;;) {
      if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
        sleepers_.fetch_add(1);
        for (std::uint32_t g = generation_.load(); g == seen; g = generation_.load()) generation_.wait(g);
        sleepers_.fetch_sub(1);
      }
      seen = generation_.load();
      if (stop_.load()) return;
      drain(thread);
      if (busy_.fetch_sub(1) == 1 && caller_sleeping_.load()) busy_.notify_one();
    }
  }

  int threads_;
  bool pins_;
  const bool profiled_;
  // Each thread's CPU seconds in its tasks of the current run, a cache line each: written by
  // that thread, read by the caller once all are done.
  struct alignas(64) TaskCpu {
    double seconds = 0;
  };
  std::vector<TaskCpu> task_cpu_;
  std::size_t pass_ = kNoStep;
  std::vector<WidePoolPass> passes_;
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t tasks_ = 0;
  bool pinned_ = false;
  // Each on its own cache line: the workers claim tasks (next_) while the caller and the
  // workers poll the others.
  alignas(64) std::atomic<std::int64_t> next_{0};
  alignas(64) std::atomic<std::uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> busy_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace skew::kernels
