// wide_train with 64-bit feature ids, end to end: a libsvm file whose ids lie past 2^40 trains
// with data.hash_bits to the same model, bit for bit at one thread, as the same file with each id
// replaced by its hashed row and hashing off; --predict hashes as the saved model records; raw
// ids past 2^32 without hashing, and hash_bits out of range, are refused naming the key.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "core/fileio.hpp"
#include "core/safetensors.hpp"
#include "lib/wide/dataset.hpp"
#include "tests/apps/wide_app_test.hpp"

using namespace skew::wide;
using skew::test::run;

namespace {
constexpr int kBits = 16;

// The raw 64-bit id standing for generator feature f: distinct for distinct f, all past 2^40.
std::uint64_t raw_id(std::uint32_t f) {
  return (std::uint64_t(1) << 40) + (std::uint64_t(f) << 20) + 13;
}

// Synthetic rows as libsvm text, each id written raw (hashed = false) or as its hashed row.
void write_libsvm(const std::string& path, const std::string& spec, bool hashed) {
  const SparseDataset d = load_dataset(spec, ReadOptions{});
  std::ostringstream os;
  for (std::int64_t r = 0; r < d.rows(); ++r) {
    os << d.label[std::size_t(r)];
    for (std::int64_t e = d.row_ptr[std::size_t(r)]; e < d.row_ptr[std::size_t(r) + 1]; ++e) {
      const std::uint64_t id = raw_id(d.index[std::size_t(e)]);
      os << ' ' << (hashed ? std::uint64_t(hashed_feature_row(id, kBits)) : id) << ':' << 0.5 + double((r + e) % 3);
    }
    os << '\n';
  }
  skew::write_file_atomic(path, os.str());
}

std::string train_command(const std::filesystem::path& dir, const std::string& name, const std::string& extra) {
  return std::string(SKEW_WIDE_TRAIN) + " --config " + SKEW_SOURCE_DIR +
         "/configs/wide.ini --data.train=" + (dir / (name + ".libsvm")).string() +
         " --data.valid=" + (dir / (name + "_valid.libsvm")).string() +
         " --model.type=fm --model.k=4 --train.epochs=2 --train.threads=1 --output.model=" +
         (dir / (name + ".safetensors")).string() + " " + extra + " > " + (dir / (name + ".log")).string() + " 2>&1";
}
}  // namespace

TEST_CASE("wide_train: ids past 2^40 hashed by data.hash_bits train as their hashed rows do, bit for bit") {
  const auto dir = std::filesystem::temp_directory_path() / ("skew_wide_hash_app_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string train = "synthetic:criteo?rows=3000&features=3000&alpha=1.1&seed=7",
                    valid = "synthetic:criteo?rows=800&features=3000&alpha=1.1&seed=7&first_row=90000";
  for (const bool hashed : {false, true}) {
    const std::string name = hashed ? "rows" : "raw";
    write_libsvm((dir / (name + ".libsvm")).string(), train, hashed);
    write_libsvm((dir / (name + "_valid.libsvm")).string(), valid, hashed);
  }
  const std::string bits = std::to_string(kBits);
  REQUIRE(run(train_command(dir, "raw", "--data.hash_bits=" + bits)) == 0);
  REQUIRE(run(train_command(dir, "rows", "--model.features=" + std::to_string(1 << kBits))) == 0);
  const skew::TensorFile raw = skew::load_safetensors((dir / "raw.safetensors").string()),
                         rows = skew::load_safetensors((dir / "rows.safetensors").string());
  CHECK(raw.metadata.at("hash_bits") == bits);
  CHECK(rows.metadata.at("hash_bits") == "0");
  CHECK(raw.metadata.at("features") == std::to_string(1 << kBits));
  const skew::Tensor &a = raw.get("params"), &b = rows.get("params");
  REQUIRE(a.numel() == b.numel());
  REQUIRE(a.numel() == 1 + (std::size_t(1) << kBits) * 5);
  std::int64_t differ = 0, nonzero = 0;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    differ += a.data<float>()[i] != b.data<float>()[i];
    nonzero += a.data<float>()[i] != 0.0f;
  }
  CHECK(differ == 0);
  CHECK(nonzero > 1000);  // trained, not an untouched model

  // --predict reads the raw file hashed as the model says, and scores as the unhashed model does.
  const auto predict = [&](const std::string& name, const std::string& extra) {
    const std::string out = (dir / (name + ".pred")).string();
    const int rc =
        run(std::string(SKEW_WIDE_TRAIN) + " --predict --predict.model=" + (dir / (name + ".safetensors")).string() +
            " --predict.data=" + (dir / (name + "_valid.libsvm")).string() + " --predict.output=" + out + " " + extra +
            " > " + out + ".log 2>&1");
    return rc == 0 ? skew::read_file(out) : "failed: " + skew::read_file(out + ".log");
  };
  const std::string scores = predict("raw", "");
  CHECK(std::count(scores.begin(), scores.end(), '\n') == 800);
  CHECK(scores == predict("rows", ""));
  CHECK_THAT(predict("raw", "--data.hash_bits=12"),
             Catch::Contains("data.hash_bits = 12") && Catch::Contains("trained with data.hash_bits = 16"));

  // Without hashing the raw ids cannot index a model: the first one is named with the fix.
  CHECK(run(train_command(dir, "raw", "")) != 0);
  CHECK_THAT(skew::read_file((dir / "raw.log").string()),
             Catch::Contains("raw.libsvm:1:") && Catch::Contains("set data.hash_bits"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("wide_train refuses data.hash_bits out of range, naming the key") {
  for (const char* bad : {"-1", "29", "64"}) {
    const auto log =
        std::filesystem::temp_directory_path() / ("skew_wide_hash_bad_" + std::to_string(getpid()) + ".log");
    const int rc =
        run(std::string(SKEW_WIDE_TRAIN) + " --data.valid= --data.hash_bits=" + bad + " > " + log.string() + " 2>&1");
    const std::string text = skew::read_file(log.string());
    INFO(text);
    CHECK(rc != 0);
    CHECK_THAT(text, Catch::Contains("bad value '" + std::string(bad) + "' for key 'data.hash_bits'"));
    std::filesystem::remove(log);
  }
}
