// A small persistent thread pool for the wide kernels: run(tasks, fn) calls fn(task, thread)
// for every task in [0, tasks), tasks claimed dynamically, and returns when all are done.
// One pool lives as long as a trainer so a mini-batch does not pay for thread start-up.
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace skew::kernels {

class WidePool {
 public:
  explicit WidePool(int threads) : threads_(threads < 1 ? 1 : threads) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~WidePool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      tasks_ = tasks;
      next_.store(0);
      busy_ = threads_ - 1;
      ++generation_;
    }
    wake_.notify_all();
    drain(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
    fn_ = nullptr;
  }

 private:
  void drain(int thread) {
    for (std::int64_t i = next_.fetch_add(1); i < tasks_; i = next_.fetch_add(1)) (*fn_)(i, thread);
  }
  void worker(int thread) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
      }
      drain(thread);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t tasks_ = 0;
  std::atomic<std::int64_t> next_{0};
  int busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace skew::kernels
