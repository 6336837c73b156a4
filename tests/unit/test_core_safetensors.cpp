// safetensors: round trip of several dtypes with metadata, the on-disk layout, and rejection
// of truncated or corrupt files with a message naming the file and the fault.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/safetensors.hpp"

using skew::DType;
using skew::Tensor;

namespace {

const std::string kDir = "/tmp/skew_core_test_safetensors";

std::string header_bytes(const std::string& json) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json;
}

std::string load_error(const std::string& name, const std::string& bytes) {
  const std::string path = kDir + "/" + name;
  skew::write_file_atomic(path, bytes);
  try {
    skew::load_safetensors(path);
  } catch (const skew::Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<std::pair<std::string, Tensor>> sample_tensors() {
  std::vector<float> w(6);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.75f * static_cast<float>(i) - 1.5f;
  Tensor bf = Tensor::empty({3}, DType::BF16);
  bf.copy_from(Tensor::from_vector(std::vector<float>{1.0f, -0.5f, 3.25f}, {3}));
  Tensor f16 = Tensor::empty({2}, DType::F16);
  f16.copy_from(Tensor::from_vector(std::vector<float>{0.125f, -7.0f}, {2}));
  return {{"layer.weight", Tensor::from_vector(w, {2, 3})},
          {"step_count", Tensor::from_vector(std::vector<std::int64_t>{-5, 1LL << 40}, {2})},
          {"ids", Tensor::from_vector(std::vector<std::int32_t>{7, -8, 9}, {3})},
          {"mask", Tensor::from_vector(std::vector<std::uint8_t>{0, 1, 255}, {3})},
          {"scale", Tensor::from_vector(std::vector<double>{3.141592653589793}, {})},
          {"bf", bf},
          {"half", f16},
          {"nothing", Tensor::empty({0, 4}, DType::F32)}};
}

}  // namespace

TEST_CASE("safetensors: round trip of several dtypes and metadata", "[safetensors]") {
  const std::string path = kDir + "/roundtrip.safetensors";
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> meta{{"step", "12"}, {"config", "[train]\nlr = 0.1\n"}};
  skew::save_safetensors(path, tensors, meta);
  const auto file = skew::load_safetensors(path);
  CHECK(file.metadata == meta);
  REQUIRE(file.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, want] = tensors[i];
    INFO("tensor " << name);
    CHECK(file.tensors[i].first == name);  // file order is kept
    const Tensor& got = file.get(name);
    CHECK(got.dtype() == want.dtype());
    CHECK(got.shape() == want.shape());
    REQUIRE(got.nbytes() == want.nbytes());
    CHECK(std::memcmp(got.raw(), want.raw(), want.nbytes()) == 0);
  }
  CHECK(file.has("ids"));
  CHECK_FALSE(file.has("missing"));
  CHECK_THROWS_WITH(file.get("missing"), Catch::Contains("tensor 'missing' not found"));
  // No temporary file is left behind.
  for (const auto& e : std::filesystem::directory_iterator(kDir))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("safetensors: a tensor read as another dtype names the tensor, the file and both dtypes", "[safetensors]") {
  std::filesystem::create_directories(kDir);
  const std::string path = kDir + "/dtype.safetensors";
  skew::save_safetensors(path, {{"w0.params", Tensor::from_vector(std::vector<std::int32_t>(5600, 3), {5600})}});
  const skew::TensorFile file = skew::load_safetensors(path);
  CHECK(file.get("w0.params").data<std::int32_t>()[5599] == 3);  // its own dtype reads
  CHECK_THROWS_WITH(file.get("w0.params").data<float>(), Catch::Contains("tensor 'w0.params' of " + path +
                                                                         " holds I32 values (I32[5600]@host), but this "
                                                                         "run reads it as F32"));
  // A copy made in memory is no longer the file's.
  CHECK(file.get("w0.params").clone().origin().empty());
  std::filesystem::remove(path);  // kDir is shared with the other cases, which may run at once
}

TEST_CASE("safetensors: layout is what PyTorch and numpy readers expect", "[safetensors]") {
  const std::string path = kDir + "/layout.safetensors";
  skew::save_safetensors(path, {{"a", Tensor::from_vector(std::vector<float>{1, 2}, {2})},
                                {"b", Tensor::from_vector(std::vector<std::int32_t>{3}, {1})}});
  const std::string bytes = skew::read_file(path);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  CHECK(n % 8 == 0);  // data section starts 8-byte aligned
  REQUIRE(bytes.size() == 8 + n + 12);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header["a"]["dtype"] == "F32");
  CHECK(header["a"]["shape"] == nlohmann::json::array({2}));
  CHECK(header["a"]["data_offsets"] == nlohmann::json::array({0, 8}));
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({8, 12}));
  CHECK_FALSE(header.contains("__metadata__"));
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  CHECK(first == 1.0f);
}

TEST_CASE("safetensors: writer refuses reserved and duplicate names", "[safetensors]") {
  const Tensor t = Tensor::from_vector(std::vector<float>{1}, {1});
  CHECK_THROWS_WITH(skew::save_safetensors(kDir + "/x.safetensors", {{"__metadata__", t}}),
                    Catch::Contains("__metadata__ is reserved"));
  CHECK_THROWS_WITH(skew::save_safetensors(kDir + "/x.safetensors", {{"a", t}, {"a", t}}),
                    Catch::Contains("duplicate tensor name 'a'"));
}

TEST_CASE("safetensors: truncated and corrupt files are rejected with the reason", "[safetensors]") {
  const std::string good_path = kDir + "/good.safetensors";
  skew::save_safetensors(good_path, sample_tensors(), {{"k", "v"}});
  const std::string good = skew::read_file(good_path);

  CHECK_THAT(load_error("short.safetensors", good.substr(0, 5)),
             Catch::Contains("corrupt safetensors file '" + kDir + "/short.safetensors'") &&
                 Catch::Contains("shorter than the 8-byte header length (5 bytes)"));
  CHECK_THAT(load_error("cut_header.safetensors", good.substr(0, 40)),
             Catch::Contains("exceeds the file (40 bytes): truncated?"));
  CHECK_THAT(load_error("cut_data.safetensors", good.substr(0, good.size() - 3)),
             Catch::Contains("data section: truncated?"));
  CHECK_THAT(load_error("not_json.safetensors", header_bytes("{\"a\": [1, ")),
             Catch::Contains("header is not valid JSON"));
  CHECK_THAT(load_error("array.safetensors", header_bytes("[1, 2]")), Catch::Contains("header is not a JSON object"));
  const std::string data(16, '\0');
  CHECK_THAT(load_error("bad_dtype.safetensors",
                        header_bytes(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})") + data),
             Catch::Contains("tensor 'a'") && Catch::Contains("unsupported dtype 'F8'"));
  CHECK_THAT(load_error("no_shape.safetensors", header_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})") + data),
             Catch::Contains("tensor 'a' entry is malformed"));
  CHECK_THAT(load_error("reversed.safetensors",
                        header_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})") + data),
             Catch::Contains("tensor 'a' has bad data_offsets"));
  CHECK_THAT(load_error("three_offsets.safetensors",
                        header_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})") + data),
             Catch::Contains("tensor 'a' has bad data_offsets"));
  CHECK_THAT(load_error("past_end.safetensors",
                        header_bytes(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})") + data),
             Catch::Contains("tensor 'a' ends at byte 32 of a 16-byte data section"));
  CHECK_THAT(load_error("size_mismatch.safetensors",
                        header_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})") + data),
             Catch::Contains("tensor 'a' has 8 bytes but its shape and dtype need 12"));
  CHECK_THAT(
      load_error("huge_shape.safetensors",
                 header_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})") + data),
      Catch::Contains("tensor 'a'") && Catch::Contains("shape"));
  CHECK_THAT(load_error("negative_dim.safetensors",
                        header_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})") + data),
             Catch::Contains("tensor 'a'") && Catch::Contains("shape"));
  CHECK_THAT(load_error("bad_meta.safetensors", header_bytes(R"({"__metadata__":{"step":3}})")),
             Catch::Contains("metadata value of 'step' is not a string"));
  CHECK_THROWS_WITH(skew::load_safetensors(kDir + "/does_not_exist.safetensors"), Catch::Contains("cannot open"));
}

TEST_CASE("safetensors: the tensors must cover the data section exactly", "[safetensors]") {
  // The format forbids holes, overlaps and trailing bytes; a damaged checkpoint with a byte
  // appended was resumed from before.
  const std::string good_path = kDir + "/tiled.safetensors";
  skew::save_safetensors(good_path, sample_tensors(), {});
  const std::string good = skew::read_file(good_path);
  CHECK_THAT(load_error("trailing.safetensors", good + "x"),
             Catch::Contains("the data section has 1 bytes after its last tensor"));
  const std::string data(16, '\0');
  CHECK_THAT(load_error("hole.safetensors", header_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})") +
                                                data),
             Catch::Contains("unused bytes 8 to 12"));
  CHECK_THAT(
      load_error("overlap.safetensors", header_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})") +
                                            data.substr(0, 12)),
      Catch::Contains("two tensors overlap at byte 8"));
  CHECK(skew::load_safetensors(good_path).tensors.size() == sample_tensors().size());
}
