// wide_train with data.max_memory_mb, end to end: a libsvm (and a libffm) file streams through
// the chunk ring and trains the same model, bit for bit at one thread over two epochs, as the
// whole load (LR and FM; the batch size leaves a final partial batch); the summary's ring peak
// stays within the ring's budget; the process's peak resident memory (VmHWM) stays within
// data.max_memory_mb, with data.valid, from the text and from the cache; a bad value near the
// end of the file is refused with its file:line; a budget that cannot hold the run, and the key
// out of range, are refused naming data.max_memory_mb, as are mid-epoch checkpoints. On two
// ranks each streams its share of the rows (the whole load's split): the same model bit for bit,
// from the text or from the cache rank 0 writes once. With data.cache on, the first pass writes
// the binary cache and the epochs read it, and a later run reads it from its first pass: the
// same model bit for bit; a cache whose checksum fails is re-parsed and rewritten, a truncated
// one refused, each named. Budgets are set above a measured baseline (a small whole-load run's
// peak), which a sanitizer build makes larger.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/fileio.hpp"
#include "lib/wide/cache.hpp"
#include "tests/apps/wide_app_test.hpp"

using skew::test::run;

#if defined(__SANITIZE_ADDRESS__)
#define SKEW_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#define SKEW_ADDRESS_SANITIZER __has_feature(address_sanitizer)
#else
#define SKEW_ADDRESS_SANITIZER 0
#endif

namespace {
struct Dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("skew_wide_stream_" + std::to_string(getpid()));
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
};

// 20000 synthetic Criteo-like rows (about 5.6 MB of libsvm text) written by wide_train --export.
void export_rows(const std::filesystem::path& file) {
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --export=" + file.string() +
              " '--data.train=synthetic:criteo?rows=20000&features=50000&alpha=1.1&seed=5' > /dev/null 2>&1") == 0);
}

// The peak resident MiB of a wide_train run on a few hundred rows, loaded whole: what the
// process holds without data (libraries, MPI), measured here rather than assumed.
// An AddressSanitizer build keeps freed memory resident in its quarantine (256 MiB by default),
// which the runs' budgets cannot count: these runs keep 1 MiB of it.
std::int64_t baseline_mib(const std::filesystem::path& dir) {
  if (SKEW_ADDRESS_SANITIZER) {
    const char* options = std::getenv("ASAN_OPTIONS");
    setenv("ASAN_OPTIONS",
           (options && *options ? std::string(options) + ":" : "").append("quarantine_size_mb=1").c_str(), 1);
  }
  const auto out = dir / "baseline";
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " '--data.train=synthetic:criteo?rows=300&features=2000&seed=3'" +
              " --model.type=fm --model.k=4 --train.epochs=1 --train.threads=1 --output.dir=" + out.string() +
              " > /dev/null 2>&1") == 0);
  const auto summary = nlohmann::json::parse(skew::read_file((out / "summary.json").string()));
  return summary["peak_rss_bytes"].get<std::int64_t>() >> 20;
}

// data.max_memory_mb at `above` MiB over the baseline.
std::string budget_over_baseline(const std::filesystem::path& dir, std::int64_t above) {
  return "--data.max_memory_mb=" + std::to_string(baseline_mib(dir) + above);
}

// Trains on `file` (data.cache off and no data.valid unless `extra` sets them); returns the log (the run must succeed
// when `ok`).
std::string train(const std::filesystem::path& dir, const std::filesystem::path& file, const std::string& name,
                  const std::string& extra, bool ok = true, const std::string& launcher = "") {
  const auto log = dir / (name + ".log");
  const int rc = run(launcher + SKEW_WIDE_TRAIN + " --data.train=" + file.string() +
                     (extra.find("--data.valid=") == std::string::npos ? " --data.valid=" : "") +
                     (extra.find("--data.cache=") == std::string::npos ? " --data.cache=false" : "") +
                     " --model.k=4 --train.epochs=2 --train.threads=1"
                     " --train.batch_size=333 --output.dir=" +
                     (dir / name).string() + " " + extra + " > " + log.string() + " 2>&1");
  const std::string text = skew::read_file(log.string());
  INFO(text);
  CHECK((rc == 0) == ok);
  return text;
}
}  // namespace

TEST_CASE("wide_train: a streamed data.train trains the whole load's model bit for bit, within the ring's budget") {
  const Dir dir;
  const std::string budget = budget_over_baseline(dir.path, 16);
  for (const std::string ext : {"libsvm", "libffm"}) {
    const auto file = dir.path / ("rows." + ext);
    export_rows(file);
    for (const std::string model : {"lr", "fm"}) {
      if (ext == "libffm" && model == "fm") continue;  // one model suffices for the format
      INFO(ext << " " << model);
      train(dir.path, file, "mem_" + model, "--model.type=" + model);
      const std::string log = train(dir.path, file, "str_" + model, "--model.type=" + model + " " + budget);
      CHECK_THAT(log, Catch::Contains("data: streaming"));
      const auto whole = skew::read_file((dir.path / ("mem_" + model) / "model.safetensors").string());
      const auto streamed = skew::read_file((dir.path / ("str_" + model) / "model.safetensors").string());
      CHECK(whole.size() > 100000);
      CHECK(whole == streamed);
      const auto summary =
          nlohmann::json::parse(skew::read_file((dir.path / ("str_" + model) / "summary.json").string()));
      CHECK(summary["streamed"] == true);
      CHECK(summary["stream_chunks_read"].get<std::int64_t>() >= 2 * 2);  // two epochs of several chunks
      CHECK(summary["stream_peak_ring_bytes"].get<std::int64_t>() <=
            summary["stream_ring_budget_bytes"].get<std::int64_t>());
      CHECK(summary["stream_ring_budget_bytes"].get<std::int64_t>() < (16 << 20));  // the rest of the run taken out
      const auto mem_summary =
          nlohmann::json::parse(skew::read_file((dir.path / ("mem_" + model) / "summary.json").string()));
      CHECK(mem_summary["streamed"] == false);
    }
  }
}

TEST_CASE(
    "wide_train: streaming refuses a bad value near the file's end, a model over the budget, the key out of range") {
  const Dir dir;
  const std::string budget = budget_over_baseline(dir.path, 16);
  const auto file = dir.path / "rows.libsvm";
  export_rows(file);
  std::string text = skew::read_file(file.string());
  const std::size_t last = text.rfind('\n', text.size() - 2) + 1;  // the start of line 20000
  text.insert(text.find(' ', last) + 1, "3:inf ");
  skew::write_file_atomic(file.string(), text);
  CHECK_THAT(train(dir.path, file, "bad", budget, false),
             Catch::Contains(file.string() + ":20000:") && Catch::Contains("not finite"));

  // FM k=4 over 2M rows: 38.1 MiB of parameters and as much AdaGrad state, more than the budget
  // (baseline + 16 MiB) before any data is read (issue 38: checked before the work).
  const auto good = dir.path / "good.libsvm";
  export_rows(good);
  CHECK_THAT(train(dir.path, good, "small", "--model.type=fm --model.features=2000000 " + budget, false),
             Catch::Contains("wide_train needs 76.3 MiB (model (2000000 features x 5 floats) 38.1 MiB + optimizer "
                             "state (adagrad) 38.1 MiB) but data.max_memory_mb = "));
  // Over 400k rows: 7.6 MiB of parameters and AdaGrad state pass that check (15.3 MiB), but with
  // the gradient, the baseline and a ring the budget is too small, which the stream finds.
  CHECK_THAT(train(dir.path, good, "smaller", "--model.type=fm --model.features=400000 " + budget, false),
             Catch::Contains("MiB cannot hold what the run holds (baseline ") &&
                 Catch::Contains("+ model 7.6 MiB + gradient 7.6 MiB + optimizer state 7.6 MiB"));
  // A streamed epoch starts from the file's start (so no mid-epoch checkpoints).
  CHECK_THAT(train(dir.path, good, "interval",
                   "--model.type=lr " + budget + " --output.checkpoint_dir=" + (dir.path / "ck").string() +
                       " --output.checkpoint_interval=10",
                   false),
             Catch::Contains("set output.checkpoint_interval = 0"));
  for (const char* bad : {"-1", "16777217"}) {
    CHECK_THAT(train(dir.path, good, "range", std::string("--data.max_memory_mb=") + bad, false),
               Catch::Contains("bad value '" + std::string(bad) + "' for key 'data.max_memory_mb'"));
  }
}

namespace {
std::string model_of(const std::filesystem::path& dir, const std::string& name) {
  return skew::read_file((dir / name / "model.safetensors").string());
}
}  // namespace

TEST_CASE(
    "wide_train: a streamed data.train writes its binary cache in the first pass and trains from it, bit for bit") {
  const Dir dir;
  const std::string budget = budget_over_baseline(dir.path, 16);
  const auto file = dir.path / "rows.libsvm";
  export_rows(file);
  const std::string cache = file.string() + ".skewbin";
  for (const std::string model : {"lr", "fm"}) {
    INFO(model);
    std::filesystem::remove(cache);
    const std::string streamed = "--model.type=" + model + " " + budget + " --data.cache=true";
    train(dir.path, file, "mem_" + model, "--model.type=" + model);
    const std::string whole = model_of(dir.path, "mem_" + model);
    REQUIRE(whole.size() > 100000);
    CHECK_THAT(train(dir.path, file, "write_" + model, streamed),
               Catch::Contains("parsing it and writing its binary cache " + cache + "; the epochs read the cache"));
    CHECK(model_of(dir.path, "write_" + model) == whole);
    REQUIRE(std::filesystem::file_size(cache) > std::filesystem::file_size(file) / 2);
    CHECK_THAT(train(dir.path, file, "read_" + model, streamed),
               Catch::Contains("over its binary cache " + cache + "; the epochs read the cache") &&
                   Catch::Contains("lines, from cache"));
    CHECK(model_of(dir.path, "read_" + model) == whole);
    train(dir.path, file, "text_" + model, "--model.type=" + model + " " + budget + " --data.cache=false");
    CHECK(model_of(dir.path, "text_" + model) == model_of(dir.path, "read_" + model));  // streamed from the text
    const auto summary =
        nlohmann::json::parse(skew::read_file((dir.path / ("read_" + model) / "summary.json").string()));
    CHECK(summary["stream_chunks_read"].get<std::int64_t>() >= 2 * 2);  // two epochs of several chunks
    CHECK(summary["stream_peak_ring_bytes"].get<std::int64_t>() <=
          summary["stream_ring_budget_bytes"].get<std::int64_t>());
  }
  std::string bytes = skew::read_file(cache);
  bytes[bytes.size() / 2] ^= 0x04;
  skew::write_file_atomic(cache, bytes);
  CHECK_THAT(train(dir.path, file, "flipped", "--model.type=fm " + budget + " --data.cache=true"),
             Catch::Contains("data cache " + cache + " fails its checksum") &&
                 Catch::Contains("writing its binary cache " + cache));
  CHECK(model_of(dir.path, "flipped") == model_of(dir.path, "mem_fm"));
  bytes = skew::read_file(cache);  // rewritten: it reads again
  CHECK_THAT(train(dir.path, file, "reread", "--model.type=fm " + budget + " --data.cache=true"),
             Catch::Contains("over its binary cache " + cache));
  skew::write_file_atomic(cache, std::string_view(bytes).substr(0, bytes.size() - 100));
  CHECK_THAT(train(dir.path, file, "truncated", "--model.type=fm " + budget + " --data.cache=true", false),
             Catch::Contains("corrupt data cache " + cache));
}

TEST_CASE("wide_train: a streamed run's peak resident memory stays within data.max_memory_mb") {
  const Dir dir;
  const std::int64_t budget_mib = baseline_mib(dir.path) + 16;
  const std::string budget = "--data.max_memory_mb=" + std::to_string(budget_mib);
  const auto file = dir.path / "rows.libsvm", valid = dir.path / "valid.libsvm";
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --export=" + file.string() +
              " '--data.train=synthetic:criteo?rows=40000&features=50000&alpha=1.1&seed=5' > /dev/null 2>&1") == 0);
  REQUIRE(run(std::string(SKEW_WIDE_TRAIN) + " --export=" + valid.string() +
              " '--data.train=synthetic:criteo?rows=3000&features=50000&alpha=1.1&seed=6' > /dev/null 2>&1") == 0);
  const auto peak_of = [&](const std::string& name) {
    const auto summary = nlohmann::json::parse(skew::read_file((dir.path / name / "summary.json").string()));
    return summary["peak_rss_bytes"].get<std::int64_t>();
  };
  // The whole load of this file would not fit: the cap binds.
  train(dir.path, file, "whole", "--model.type=fm --data.valid=" + valid.string());
  CHECK(peak_of("whole") > (budget_mib << 20));
  for (const std::string model : {"lr", "fm"}) {
    std::filesystem::remove(file.string() + ".skewbin");
    // The first pass parses the text and writes the cache, the next run reads it from the
    // first pass on, the last parses the text every epoch.
    for (const std::string cache : {"true", "true", "false"}) {
      const std::string name =
          model + "_" + std::to_string(std::filesystem::exists(file.string() + ".skewbin")) + cache;
      INFO(name << " " << budget);
      train(dir.path, file, name,
            "--model.type=" + model + " " + budget + " --data.cache=" + cache + " --data.valid=" + valid.string());
      const auto summary = nlohmann::json::parse(skew::read_file((dir.path / name / "summary.json").string()));
      CHECK(summary["streamed"] == true);
      CHECK(summary["stream_ring_budget_bytes"].get<std::int64_t>() > 0);
      if (SKEW_ADDRESS_SANITIZER)  // its shadow memory grows with the heap, uncounted
        WARN("AddressSanitizer's shadow memory and quarantine come on top of the budget: the peak is not checked");
      else
        CHECK(peak_of(name) <= (budget_mib << 20));
    }
  }
}

TEST_CASE("wide_train: two ranks stream their shares of the rows and train the two-rank whole load's model") {
  const Dir dir;
  const std::string budget = budget_over_baseline(dir.path, 16);
  const std::string np2 = std::string(SKEW_MPIEXEC) + " --oversubscribe -np 2 ";
  const auto file = dir.path / "rows.libsvm";
  export_rows(file);
  const std::string cache = file.string() + ".skewbin", streamed = "--model.type=fm " + budget;
  train(dir.path, file, "whole", "--model.type=fm", true, np2);
  const std::string whole = model_of(dir.path, "whole");
  REQUIRE(whole.size() > 100000);
  // Rank 0 parses the text and writes the cache; rank 1 opens it once rank 0 has renamed it into
  // place (it waits in the broadcast of rank 0's first-pass figures).
  CHECK_THAT(train(dir.path, file, "write", streamed + " --data.cache=true", true, np2),
             Catch::Contains("parsing it and writing its binary cache " + cache));
  CHECK(model_of(dir.path, "write") == whole);
  train(dir.path, file, "text", streamed + " --data.cache=false", true, np2);  // each rank parses the text
  CHECK(model_of(dir.path, "text") == whole);
  // The text overwritten and the cache's header forged to the new file's identity (size, mtime,
  // ctime, inode; the payload's checksum does not cover them): the cache stands for it, so a rank
  // that parsed the text would fail; both ranks read their rows from the cache.
  std::string forged = skew::read_file(cache);
  skew::write_file_atomic(file.string(), std::string(std::filesystem::file_size(file), '#'));
  const skew::wide::CacheHeader key = skew::wide::cache_key(file.string(), skew::wide::TextFormat::Libsvm, false, 0);
  std::memcpy(forged.data(), &key, offsetof(skew::wide::CacheHeader, format));
  std::memcpy(forged.data() + offsetof(skew::wide::CacheHeader, source_ctime), &key.source_ctime,
              sizeof key.source_ctime + sizeof key.source_inode);
  skew::write_file_atomic(cache, forged);
  CHECK_THAT(train(dir.path, file, "read", streamed + " --data.cache=true", true, np2),
             Catch::Contains("over its binary cache " + cache));
  CHECK(model_of(dir.path, "read") == whole);
}
