#include "core/thread_limits.hpp"

#include <algorithm>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"

namespace skew {

int machine_cpus() {
  return std::max(1u, std::thread::hardware_concurrency());
}

int max_threads() {
  return kThreadsPerCpu * machine_cpus();
}

void require_thread_count(const std::string& key, std::int64_t threads) {
  SKEW_CHECK(threads <= max_threads(), key << " = " << threads << " is more than " << kThreadsPerCpu
                                           << " threads per CPU of this machine's " << machine_cpus() << " (at most "
                                           << max_threads() << "): lower " << key);
}

int capped_thread_count(const std::string& key, int threads) {
  if (threads <= max_threads()) return threads;
  SKEW_WARN(key << " = " << threads << " is more than " << kThreadsPerCpu << " threads per CPU of this machine's "
                << machine_cpus() << ": using " << max_threads());
  return max_threads();
}

std::string thread_start_failure(const std::string& key, int index, int count, const std::system_error& e) {
  return "cannot start thread " + std::to_string(index + 1) + " of " + std::to_string(count) + " (" + key + " = " +
         std::to_string(count) + "): " + e.what() + "; lower " + key;
}

}  // namespace skew
