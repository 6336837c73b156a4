#include "lib/core/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lib/core/error.hpp"
#include "lib/core/fileio.hpp"

namespace fs = std::filesystem;

namespace skew {

CheckpointDir::CheckpointDir(std::string dir, int rank, int world_size, int keep)
    : dir_(std::move(dir)), rank_(rank), world_size_(world_size), keep_(keep) {
  SKEW_CHECK(keep_ >= 1, "checkpoint retention must keep at least 1 step, got " << keep_);
}

std::string CheckpointDir::step_dir(std::int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return (fs::path(dir_) / name).string();
}

std::string CheckpointDir::shard_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d.safetensors", rank);
  return name;
}

std::string CheckpointDir::rank_file(std::int64_t step) const {
  return (fs::path(step_dir(step)) / shard_name(rank_)).string();
}

void CheckpointDir::write_shard(std::int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                std::map<std::string, std::string> metadata) const {
  metadata["step"] = std::to_string(step);
  metadata["rank"] = std::to_string(rank_);
  metadata["world_size"] = std::to_string(world_size_);
  save_safetensors(rank_file(step), tensors, metadata);
}

void CheckpointDir::commit(std::int64_t step) const {
  for (int r = 0; r < world_size_; ++r)
    SKEW_CHECK(fs::exists(fs::path(step_dir(step)) / shard_name(r)),
               "checkpoint step " << step << " is missing the shard of rank " << r);
  write_file_atomic((fs::path(step_dir(step)) / "COMPLETE").string(), "world_size=" + std::to_string(world_size_) + "\n");
  // Steps older than this one that never completed are leftovers of a crashed run: drop them.
  for (const std::int64_t old : step_numbers(false))
    if (old < step && !fs::exists(fs::path(step_dir(old)) / "COMPLETE")) fs::remove_all(step_dir(old));
  auto steps = complete_steps();
  while (static_cast<int>(steps.size()) > keep_) {
    fs::remove_all(step_dir(steps.front()));
    steps.erase(steps.begin());
  }
}

std::vector<std::int64_t> CheckpointDir::step_numbers(bool complete_only) const {
  std::vector<std::int64_t> steps;
  if (!fs::is_directory(dir_)) return steps;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0 || (complete_only && !fs::exists(e.path() / "COMPLETE"))) continue;
    // Only names this class writes: "step_" and digits.
    const std::string digits = name.substr(5);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    steps.push_back(std::stoll(digits));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<std::int64_t> CheckpointDir::complete_steps() const { return step_numbers(true); }

std::int64_t CheckpointDir::latest_complete() const {
  const auto steps = complete_steps();
  if (steps.empty()) return -1;
  const std::int64_t step = steps.back();
  const std::string marker = read_file((fs::path(step_dir(step)) / "COMPLETE").string());
  const std::string want = "world_size=" + std::to_string(world_size_) + "\n";
  SKEW_CHECK(marker == want, "checkpoint " << step_dir(step) << " was written by a job with "
                                           << marker.substr(0, marker.find('\n'))
                                           << " but this job has world_size=" << world_size_
                                           << "; resume with the same number of ranks or start a new checkpoint directory");
  return step;
}

TensorFile CheckpointDir::read_shard(std::int64_t step) const { return load_safetensors(rank_file(step)); }

Json CheckpointDir::describe_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  Json out = Json::object();
  for (const auto& [name, t] : tensors) out[name] = {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}};
  return out;
}

std::string CheckpointDir::index_file(std::int64_t step) const {
  return (fs::path(step_dir(step)) / "index.json").string();
}

void CheckpointDir::write_index(std::int64_t step, Json index) const {
  index["step"] = step;
  index["world_size"] = world_size_;
  write_file_atomic(index_file(step), index.dump(1) + "\n");
}

Json CheckpointDir::read_index(std::int64_t step) const {
  const std::string path = index_file(step);
  SKEW_CHECK(fs::exists(path), "checkpoint index " << path << " is missing (a checkpoint written without an index)");
  Json index = Json::parse(read_file(path), nullptr, false);
  SKEW_CHECK(!index.is_discarded() && index.is_object(), "checkpoint index " << path << " is not a JSON object");
  SKEW_CHECK(index.value("step", std::int64_t{-1}) == step,
             "checkpoint index " << path << " records step " << index.value("step", Json()).dump() << ", not " << step);
  SKEW_CHECK(index.value("world_size", -1) == world_size_, "checkpoint index " << path << " records world_size "
                                                               << index.value("world_size", Json()).dump()
                                                               << " but this job has " << world_size_);
  return index;
}

}  // namespace skew
