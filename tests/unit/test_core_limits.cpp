// Issue 38's shared pieces: the resume walk every app uses (core/checkpoint_resume.hpp), the
// memory check (core/memory_limits.hpp) and the thread-count bound (core/thread_limits.hpp),
// each against values worked out by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/checkpoint_resume.hpp"
#include "core/memory_limits.hpp"
#include "core/thread_limits.hpp"
#include "tests/safetensors_damage.hpp"
#include "tests/unit/error_message.hpp"

namespace fs = std::filesystem;
using skew::CheckpointDir;
using skew::Tensor;
using skew::test::error_of;

namespace {

// Steps 10, 20 and 30, each shard holding its step number in "w".
CheckpointDir three_steps(const std::string& dir) {
  fs::remove_all(dir);
  CheckpointDir ck(dir, 0, 1, 3);
  for (int step : {10, 20, 30}) {
    std::vector<float> w(16, float(step));
    ck.write_shard(step, {{"w", Tensor::from_vector(w, {16})}}, {});
    ck.commit(step);
  }
  return ck;
}

// The walk over `ck` as an app makes it: the shard read (verified), its "w" loaded.
std::int64_t resume(const CheckpointDir& ck, float& loaded) {
  skew::TensorFile shard;
  skew::ResumeSteps how;
  how.read = [&](std::int64_t step) { shard = ck.read_shard(step); };
  how.agree = skew::this_process_only;
  how.load = [&](std::int64_t) { loaded = shard.get("w").data<float>()[0]; };
  return skew::resume_newest_intact(ck, how);
}

}  // namespace

TEST_CASE("resume_newest_intact loads the newest step, skips a damaged one and un-marks it") {
  const std::string dir = "/tmp/skew_core_test_limits_resume";
  CheckpointDir ck = three_steps(dir);
  float loaded = 0;
  CHECK(resume(ck, loaded) == 30);
  CHECK(loaded == 30.0f);
  skew::test::flip_tensor_byte(ck.rank_file(30), "w", 5);
  CHECK(resume(ck, loaded) == 20);
  CHECK(loaded == 20.0f);
  CHECK(ck.complete_steps() == std::vector<std::int64_t>{10, 20});  // 30 lost its marker
  skew::test::flip_tensor_byte(ck.rank_file(20), "w", 0);
  skew::test::flip_tensor_byte(ck.rank_file(10), "w", 63);
  const std::string why = error_of([&] { resume(ck, loaded); });
  CHECK_THAT(why, Catch::Contains("no complete checkpoint step in " + dir + " verifies on every rank") &&
                      Catch::Contains("step 20: checkpoint shard " + ck.rank_file(20)) &&
                      Catch::Contains("step 10: checkpoint shard " + ck.rank_file(10)));
  fs::remove_all(dir);
  CHECK(resume(ck, loaded) == -1);  // nothing to resume from
}

TEST_CASE("resume_newest_intact skips a step another rank could not read") {
  const std::string dir = "/tmp/skew_core_test_limits_agree";
  CheckpointDir ck = three_steps(dir);
  skew::ResumeSteps how;
  how.read = [](std::int64_t) {};
  how.agree = [](bool) { return false; };  // the other rank fails every step
  how.load = [](std::int64_t) {};
  CHECK_THAT(error_of([&] { skew::resume_newest_intact(ck, how); }),
             Catch::Contains("step 30: failed on another rank; step 20: failed on another rank"));
  fs::remove_all(dir);
}

TEST_CASE("byte_size and require_memory state sizes in binary units") {
  CHECK(skew::byte_size(512) == "512 bytes");
  CHECK(skew::byte_size(1536) == "1.5 KiB");
  CHECK(skew::byte_size(3.0 * (1 << 20)) == "3.0 MiB");
  CHECK(skew::byte_size(std::ldexp(1.0, 41)) == "2.0 TiB");
  const skew::MemoryLimit cap{2, "x.max_mb", "lower x.size"};
  // 1 MiB + 1.5 MiB = 2.5 MiB > 2 MiB.
  CHECK(error_of([&] {
          skew::require_memory("app", {{"a", double(1 << 20)}, {"b", 1.5 * (1 << 20)}}, cap);
        }) ==
        "app needs 2.5 MiB (a 1.0 MiB + b 1.5 MiB) but x.max_mb = 2 allows 2.0 MiB: lower x.size, or raise "
        "x.max_mb");
  skew::require_memory("app", {{"a", double(2 << 20)}}, cap);  // exactly the cap: fits
  CHECK(skew::available_memory_bytes() > 0);
  CHECK_THAT(error_of([&] {
               skew::require_memory("app", {{"a", 1e30}}, {0, "k", "lower k"});
             }),
             Catch::Contains("are available (MemAvailable in /proc/meminfo): lower k"));
}

TEST_CASE("allocating names the object whose allocation failed") {
  CHECK(error_of([] { skew::allocating("the table", 3.0 * (1 << 30), []() -> int { throw std::bad_alloc(); }); }) ==
        "out of memory allocating the table (3.0 GiB)");
  CHECK(error_of([] {
          skew::allocating("the model", -1,
                           []() -> int { throw skew::OutOfMemory("out of host memory allocating 8 bytes"); });
        }) == "out of memory allocating the model: out of host memory allocating 8 bytes");
  CHECK(skew::allocating("a value", 4, [] { return 7; }) == 7);
}

TEST_CASE("thread counts above 8 per CPU are refused or capped") {
  const int most = 8 * skew::machine_cpus();
  CHECK(skew::max_threads() == most);
  skew::require_thread_count("t.threads", most);
  CHECK(error_of([&] { skew::require_thread_count("t.threads", most + 1); }) ==
        "t.threads = " + std::to_string(most + 1) + " is more than 8 threads per CPU of this machine's " +
            std::to_string(skew::machine_cpus()) + " (at most " + std::to_string(most) + "): lower t.threads");
  CHECK(skew::capped_thread_count("t.blas", most + 5) == most);
  CHECK(skew::capped_thread_count("t.blas", 3) == 3);
}
