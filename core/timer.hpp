// Wall-clock timing for progress lines and benchmarks, and CPU time for benchmarks on shared
// machines (other processes stretch wall time, not the CPU time a measured piece of work takes).
#pragma once
#include <time.h>

#include <chrono>

namespace skew {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds on a POSIX CPU-time clock.
inline double cpu_clock_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// CPU seconds used by the calling thread.
inline double thread_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID);
}

// CPU seconds used by the whole process, all threads together.
inline double process_cpu_seconds() {
  return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

}  // namespace skew
