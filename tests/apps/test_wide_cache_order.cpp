// wide_train renumbers features by the frequency order stored in data.train's binary cache
// (lib/wide/cache.hpp) instead of counting them: the model must be bit for bit the one a run
// that counts (data.cache = false) trains, on 1 and 2 ranks, whether the cache was just written
// or is read; an order that misses a feature of the rows is refused naming the cache.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "core/checksum.hpp"
#include "core/fileio.hpp"
#include "kernels/wide_pool.hpp"
#include "lib/wide/cache.hpp"
#include "lib/wide/dataset.hpp"
#include "tests/apps/wide_app_test.hpp"

using namespace skew::wide;

namespace {

struct Runs {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("skew_wide_cache_order_" + std::to_string(getpid()));
  std::string train = (dir / "train.libsvm").string(), cache = train + ".skewbin";
  explicit Runs(int rows = 3000) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string spec = "synthetic:criteo?rows=" + std::to_string(rows) + "&features=9000&alpha=1.1&seed=3";
    const SparseDataset d = generate_synthetic(parse_synthetic_spec(spec), 0, rows);
    skew::write_file_atomic(train, format_text(d, TextFormat::Libsvm));
  }
  ~Runs() { std::filesystem::remove_all(dir); }
  // FM k=4 on `ranks` ranks; returns the exit code, the model's bytes in *model and the log in *log.
  int fit(int ranks, const std::string& name, const std::string& extra, std::string* model, std::string* log) const {
    const std::string out = (dir / name).string();
    const std::string launch =
        ranks == 1 ? "" : std::string(SKEW_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) + " ";
    const int code = skew::test::run(
        launch + SKEW_WIDE_TRAIN + " --data.train=" + train + " --data.valid= --model.type=fm --model.k=4" +
        " --train.epochs=2 --train.batch_size=256 --output.dir=" + out + " " + extra + " > " + out + ".log 2>&1");
    *log = skew::read_file(out + ".log");
    if (code == 0) *model = skew::read_file(out + "/model.safetensors");
    return code;
  }
};

}  // namespace

TEST_CASE(
    "wide_train renumbers by the cache's frequency order: the model counting trains, bit for bit, on 1 and 2 ranks") {
  for (const int ranks : {1, 2}) {
    INFO(ranks << " rank(s)");
    const Runs r;
    std::string counted, written, read, log;
    REQUIRE(r.fit(ranks, "counted", "--data.cache=false", &counted, &log) == 0);
    CHECK_THAT(log, Catch::Contains("occur (counted over " + std::to_string(ranks) + " rank(s))"));
    REQUIRE_FALSE(std::filesystem::exists(r.cache));
    REQUIRE(r.fit(ranks, "written", "", &written, &log) == 0);  // parses the text, writes the cache
    REQUIRE(std::filesystem::exists(r.cache));
    CHECK_THAT(log, Catch::Contains("occur (order read from the cache)"));
    REQUIRE(r.fit(ranks, "read", "", &read, &log) == 0);
    CHECK_THAT(log, Catch::Contains("from cache") && Catch::Contains("occur (order read from the cache)"));
    CHECK(written == counted);
    CHECK(read == counted);
  }
}

TEST_CASE("wide_train refuses a binary cache whose frequency order misses a feature of the rows, naming it") {
  const Runs r;
  std::string model, log;
  REQUIRE(r.fit(1, "first", "", &model, &log) == 0);
  // Forge the cache as a writer that dropped the order's last id would have: the order one id
  // shorter, its length (the last 8 bytes) one less, the payload's CRC-32C (at byte 80) resealed.
  std::string bytes = skew::read_file(r.cache);
  std::int64_t occurring = 0;
  std::memcpy(&occurring, bytes.data() + bytes.size() - 8, 8);
  REQUIRE(occurring > 1);
  bytes.erase(bytes.size() - 12, 4);
  --occurring;
  std::memcpy(bytes.data() + bytes.size() - 8, &occurring, 8);
  const std::uint32_t crc =
      skew::crc32c(bytes.data() + sizeof(skew::wide::CacheHeader), bytes.size() - sizeof(skew::wide::CacheHeader));
  std::memcpy(bytes.data() + 80, &crc, 4);
  skew::write_file_atomic(r.cache, bytes);
  CHECK(r.fit(1, "forged", "", &model, &log) != 0);
  CHECK_THAT(log, Catch::Contains("corrupt data cache " + r.cache) && Catch::Contains("misses features of its rows"));
}

TEST_CASE(
    "wide_train trains while data.train loads from its cache: the load-first model bit for bit, a damaged cache starts "
    "the run over") {
  if (skew::kernels::process_cpus() < 2) {
    WARN("skipped: the load overlaps training only with a CPU beside train.threads = 1, and this process has one");
    return;
  }
  const Runs r(10000);  // three chunks of 4096 rows
  std::string first, overlapped, log;
  REQUIRE(r.fit(1, "first", "--data.load_overlap=false", &first, &log) == 0);  // parses, writes the cache
  REQUIRE(r.fit(1, "loaded", "--data.load_overlap=false", &first, &log) == 0);
  CHECK_THAT(log, Catch::Contains("from cache, 0 skipped, 0."));
  REQUIRE(r.fit(1, "overlapped", "", &overlapped, &log) == 0);
  CHECK_THAT(log, Catch::Contains("load from the cache while training starts") && Catch::Contains("(checksum holds)"));
  CHECK(skew::read_file((r.dir / "overlapped" / "summary.json").string()).find("\"data_load_overlapped\":true") !=
        std::string::npos);
  CHECK(overlapped == first);

  // A value changed to another finite value in the last chunk: only the checksum sees it, once
  // the rows before were trained on; the run starts over from the text and rewrites the cache.
  const std::string good = skew::read_file(r.cache);
  std::int64_t occurring = 0;  // the frequency order's length closes the file, after its ids
  std::memcpy(&occurring, good.data() + good.size() - 8, 8);
  const std::size_t values_end = good.size() - 8 - 4 * std::size_t(occurring);
  std::string damaged = good;
  damaged[values_end - 4 * 1000 + 1] ^= 0x10;  // the 1000th value from the end
  skew::write_file_atomic(r.cache, damaged);
  std::string restarted;
  REQUIRE(r.fit(1, "restarted", "", &restarted, &log) == 0);
  CHECK_THAT(log, Catch::Contains("fails its checksum") && Catch::Contains("starting the run over from the text"));
  CHECK(restarted == first);
  CHECK(skew::read_file(r.cache) == good);
}

TEST_CASE(
    "wide_train's load beside the first epoch: a checkpoint within it waits for the whole load, resumed there, the "
    "same model") {
  if (skew::kernels::process_cpus() < 2) {
    WARN("skipped: the load overlaps training only with a CPU beside train.threads = 1, and this process has one");
    return;
  }
  const Runs r(10000);  // 40 steps of 256 rows an epoch
  std::string first, checkpointed, resumed, log;
  REQUIRE(r.fit(1, "first", "--data.load_overlap=false", &first, &log) == 0);  // writes the cache
  const std::filesystem::path ckpt = r.dir / "ckpt";
  const std::string checkpoints = " --output.checkpoint_dir=" + ckpt.string() + " --output.keep=100";
  REQUIRE(r.fit(1, "checkpointed", checkpoints + " --output.checkpoint_interval=3", &checkpointed, &log) == 0);
  CHECK_THAT(log, Catch::Contains("load from the cache while training starts"));
  CHECK(checkpointed == first);
  // Resumed from step 3 (the first epoch's first checkpoint), as if the run had died after it.
  REQUIRE(std::filesystem::exists(ckpt / "step_00000003" / "COMPLETE"));
  for (const auto& e : std::filesystem::directory_iterator(ckpt))
    if (e.path().filename().string() > "step_00000003") std::filesystem::remove_all(e.path());
  REQUIRE(r.fit(1, "resumed", checkpoints + " --output.resume=true", &resumed, &log) == 0);
  CHECK_THAT(log, Catch::Contains("load from the cache while training starts"));
  CHECK(resumed == first);
}
