// Shared helpers of the moe_train tests: a tiny config, in-process runs, scratch directories,
// checkpoint shard comparison.
#pragma once
#include <mpi.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "apps/moe_train_options.hpp"
#include "core/config.hpp"
#include "core/safetensors.hpp"
#include "lib/moe/resume.hpp"
#include "lib/moe/trainer.hpp"
#include "mpi/mpi_process_group.hpp"

namespace skew_moe_test {
using namespace skew;

inline comm::ProcessGroup& world() {
  static comm::MpiProcessGroup group(MPI_COMM_WORLD);
  return group;
}

inline const char* kTiny = R"(
[data]
builtin_bytes = 60000
[model]
d_model = 32
heads = 2
layers = 2
seq_len = 32
[moe]
num_experts = 4
top_k = 2
d_ff = 64
jitter = 0.05
[train]
batch_size = 8
iterations = 40
warmup = 5
eval_interval = 0
eval_sequences = 16
log_interval = 0
)";

inline Json run(const Schema& schema, std::vector<std::string> overrides) {
  return moe::train(moe_train_options(Config::parse_ini_text(schema, kTiny, "test", overrides)), world());
}

// A scratch directory shared by the ranks (rank 0 names it).
inline std::string scratch(const std::string& name) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("skew_moe_" + name + "_" + std::to_string(::getpid()))).string();
  int len = static_cast<int>(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<std::size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world().rank() == 0) std::filesystem::remove_all(dir), std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

inline std::vector<Json> read_jsonl(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

// Two checkpoint shards hold the same tensors, byte for byte.
inline void require_identical_shards(const std::string& path_a, const std::string& path_b) {
  const TensorFile x = load_safetensors(path_a), y = load_safetensors(path_b);
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (std::size_t i = 0; i < x.tensors.size(); ++i) {
    REQUIRE(x.tensors[i].first == y.tensors[i].first);
    REQUIRE(x.tensors[i].second.nbytes() == y.tensors[i].second.nbytes());
    REQUIRE(std::memcmp(x.tensors[i].second.raw(), y.tensors[i].second.raw(), x.tensors[i].second.nbytes()) == 0);
  }
}

}  // namespace skew_moe_test
