// A small persistent thread pool for the wide kernels: run(tasks, fn) calls fn(task, thread)
// for every task in [0, tasks), tasks claimed dynamically, and returns when all are done.
// One pool lives as long as a trainer so a mini-batch does not pay for thread start-up.
//
// A training step hands work to the pool three or four times, and a 2-thread LR step lasts about
// a quarter of a millisecond: a hand-off through a sleeping thread (futex wake, the scheduler running the
// thread, a futex wake back) costs 5-50 us on a VM, a spin on an atomic about a cache-line
// transfer. So both sides spin for a while before they sleep: the workers on the generation
// that announces the next run, the caller on the count of workers still busy. The
// wake-up syscall is made only when the other side went to sleep (Dekker-style: each side
// publishes, then checks the other's flag, all seq_cst). Bounded spins keep an idle pool
// (between epochs, during validation) off the cores.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace skew::kernels {

class WidePool {
 public:
  explicit WidePool(int threads) : threads_(threads < 1 ? 1 : threads) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~WidePool() {
    stop_.store(true);
    announce();
    for (auto& w : workers_) w.join();
  }
  WidePool(const WidePool&) = delete;
  WidePool& operator=(const WidePool&) = delete;

  int threads() const { return threads_; }

  void run(std::int64_t tasks, const std::function<void(std::int64_t task, int thread)>& fn) {
    if (threads_ == 1 || tasks <= 1) {
      for (std::int64_t i = 0; i < tasks; ++i) fn(i, 0);
      return;
    }
    fn_ = &fn;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(threads_ - 1, std::memory_order_relaxed);
    announce();  // seq_cst: the stores above happen before any worker sees the new generation
    drain(0);
    wait_while_nonzero(busy_, caller_sleeping_);
    fn_ = nullptr;
  }

 private:
  // How long a side spins before it sleeps, adapted per side: a spin that sees the other side
  // arrive doubles the next (up to kSpinMaxNs: longer than a step's serial part, the loss and
  // the touched list, tens of microseconds), one that runs out drops it to kSpinMinNs. Another
  // process on the cores deschedules the side waited for, and spinning on for it takes the core
  // from it: with a CPU-bound process beside a 2-thread LR run, a fixed 200 us spin ran 3x
  // slower than sleeping at once, this one about 1.25x slower (and 1.6x faster on idle cores).
  static constexpr std::int64_t kSpinMaxNs = 50000, kSpinMinNs = 1000;

  // Not the PAUSE instruction: a VM's hypervisor takes a run of PAUSEs for a spin on a lock held
  // by a descheduled vCPU and deschedules the spinner (pause-loop exiting). On this project's
  // 2-vCPU VM that made a 2-thread LR epoch 4-5x slower than not spinning at all; plain reloads of
  // the atomic (a compiler barrier between them) spin without a VM exit.
  static void pause() { asm volatile("" ::: "memory"); }

  // Spins until `pred` holds or `budget_ns` passes, then adapts the budget; true when it holds.
  template <typename Pred>
  static bool spin_until(Pred pred, std::int64_t& budget_ns) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(budget_ns);
    for (int i = 1;; ++i) {
      if (pred()) {
        budget_ns = std::min(kSpinMaxNs, budget_ns * 2);
        return true;
      }
      pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
        budget_ns = kSpinMinNs;
        return pred();
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
    if (spin_until([&] { return count.load(std::memory_order_acquire) == 0; }, caller_spin_ns_)) return;
    sleeping.store(true);
    for (int c = count.load(); c != 0; c = count.load()) count.wait(c);
    sleeping.store(false);
  }

  void drain(int thread) {
    for (std::int64_t i = next_.fetch_add(1); i < tasks_; i = next_.fetch_add(1)) (*fn_)(i, thread);
  }

  void worker(int thread) {
    std::uint32_t seen = 0;
    std::int64_t spin_ns = kSpinMaxNs;
    for (;;) {
      if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, spin_ns)) {
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
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t tasks_ = 0;
  std::int64_t caller_spin_ns_ = kSpinMaxNs;
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
