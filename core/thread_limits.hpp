// Thread counts checked before the work (issue 38): a count far beyond the machine's CPUs buys
// no speed and can fail to start (each thread takes a stack; a process may create only so many),
// so such a key is refused, or capped with a warning where the count is a library's hint, and a
// thread that cannot be created is an error naming the key rather than std::terminate.
#pragma once
#include <cstdint>
#include <string>
#include <system_error>

namespace skew {

// Threads per CPU beyond which a thread-count key is refused: oversubscription is allowed (the
// tests run 4 threads on 2 CPUs), a thousand threads on two CPUs are not.
constexpr int kThreadsPerCpu = 8;

// The machine's CPUs (std::thread::hardware_concurrency, at least 1).
int machine_cpus();
// The most threads a thread-count key may ask for: kThreadsPerCpu x machine_cpus().
int max_threads();

// Throws naming `key`, its value and the bound when `threads` > max_threads().
void require_thread_count(const std::string& key, std::int64_t threads);
// `threads`, or max_threads() with a warning naming `key` when it is more.
int capped_thread_count(const std::string& key, int threads);

// The error for thread `index` (0-based) of `count` failing to start: names the key to lower.
std::string thread_start_failure(const std::string& key, int index, int count, const std::system_error& e);

}  // namespace skew
