#include "core/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"

namespace fs = std::filesystem;

namespace skew {

namespace {
constexpr const char* kChecksumPrefix = "crc32c:";

// Makes a directory's entry changes (a removed marker) durable before what depends on them.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  SKEW_CHECK(fd >= 0, "cannot open checkpoint directory " << dir << " to sync it");
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  SKEW_CHECK(synced, "fsync of checkpoint directory " << dir << " failed");
}

// Fault injection for the resume tests (scripts/resume_faults.py): with
// SKEW_TEST_KILL_IN_CHECKPOINT=STEP[:RANK], that rank (0 unless given) dies by SIGKILL halfway
// through writing its shard of STEP, leaving what a kill -9 there leaves: a half-written
// temporary file beside the shards, no shard of its own, no marker. Deterministic, where a kill
// from outside lands wherever the scheduler puts it.
bool kill_requested(std::int64_t step, int rank) {
  const char* spec = std::getenv("SKEW_TEST_KILL_IN_CHECKPOINT");
  if (spec == nullptr) return false;
  long long want_step = -1;
  int want_rank = 0;
  const int fields = std::sscanf(spec, "%lld:%d", &want_step, &want_rank);
  return fields >= 1 && want_step == step && want_rank == rank;
}

[[noreturn]] void die_mid_write(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  save_safetensors(tmp, tensors, metadata);
  const auto size = static_cast<off_t>(fs::file_size(tmp));
  SKEW_CHECK(::truncate(tmp.c_str(), size / 2) == 0, "cannot truncate " << tmp);
  std::raise(SIGKILL);
  std::abort();  // not reached: SIGKILL cannot be caught
}
}  // namespace

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
  return shard_file(step, rank_);
}

std::string CheckpointDir::shard_file(std::int64_t step, int rank) const {
  return (fs::path(step_dir(step)) / shard_name(rank)).string();
}

void CheckpointDir::write_shard(std::int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                std::map<std::string, std::string> metadata) const {
  metadata["step"] = std::to_string(step);
  metadata["rank"] = std::to_string(rank_);
  metadata["world_size"] = std::to_string(world_size_);
  add_checksums(tensors, metadata);
  if (kill_requested(step, rank_)) die_mid_write(rank_file(step), tensors, metadata);
  save_safetensors(rank_file(step), tensors, metadata);
}

void CheckpointDir::add_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                  std::map<std::string, std::string>& metadata) {
  for (const auto& [name, t] : tensors)
    metadata[kChecksumPrefix + name] = crc32c_hex(t.device() == Device::Host ? t : t.to(Device::Host));
}

void CheckpointDir::commit(std::int64_t step) const {
  for (int r = 0; r < world_size_; ++r)
    SKEW_CHECK(fs::exists(fs::path(step_dir(step)) / shard_name(r)),
               "checkpoint step " << step << " is missing the shard of rank " << r);
  write_file_atomic((fs::path(step_dir(step)) / "COMPLETE").string(),
                    "world_size=" + std::to_string(world_size_) + "\n");
  // Steps older than this one that never completed are leftovers of a crashed run: drop them.
  for (const std::int64_t old : step_numbers(false))
    if (old < step && !fs::exists(fs::path(step_dir(old)) / "COMPLETE")) fs::remove_all(step_dir(old));
  auto steps = complete_steps();
  while (static_cast<int>(steps.size()) > keep_) {
    prune(steps.front());
    steps.erase(steps.begin());
  }
}

void CheckpointDir::prune(std::int64_t step) const {
  // The marker goes first and durably: killed after this, the step is an unmarked leftover that
  // no resume picks and the next commit clears; never a marked step with shards missing.
  unmark(step);
  fs::remove_all(step_dir(step));
}

void CheckpointDir::unmark(std::int64_t step) const {
  const std::string dir = step_dir(step);
  fs::remove(fs::path(dir) / "COMPLETE");
  sync_directory(dir);
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

std::vector<std::int64_t> CheckpointDir::complete_steps() const {
  return step_numbers(true);
}

int CheckpointDir::written_world_size(std::int64_t step) const {
  const std::string path = (fs::path(step_dir(step)) / "COMPLETE").string();
  const std::string marker = read_file(path);
  const std::string key = "world_size=";
  std::size_t digits = 0;
  int size = 0;
  if (marker.rfind(key, 0) == 0) {
    try {
      size = std::stoi(marker.substr(key.size()), &digits);
    } catch (const std::exception&) {
      digits = 0;
    }
  }
  SKEW_CHECK(digits > 0 && size >= 1, "checkpoint marker " << path << " does not record a world size (\""
                                                           << marker.substr(0, marker.find('\n')) << "\")");
  return size;
}

std::int64_t CheckpointDir::latest_complete() const {
  const auto steps = complete_steps();
  if (steps.empty()) return -1;
  require_this_world_size(steps.back());
  return steps.back();
}

void CheckpointDir::require_this_world_size(std::int64_t step) const {
  const int written = written_world_size(step);
  SKEW_CHECK(written == world_size_,
             "checkpoint " << step_dir(step) << " was written by a job with world_size=" << written
                           << " but this job has world_size=" << world_size_
                           << "; resume with the same number of ranks or start a new checkpoint directory");
}

TensorFile CheckpointDir::read_shard(std::int64_t step, int rank) const {
  const std::string path = shard_file(step, rank);
  TensorFile shard = load_safetensors(path);
  verify_shard(shard, path);
  return shard;
}

void CheckpointDir::verify_shard(const TensorFile& shard, const std::string& path) {
  const bool has_checksums = std::any_of(shard.metadata.begin(), shard.metadata.end(),
                                         [](const auto& kv) { return kv.first.rfind(kChecksumPrefix, 0) == 0; });
  if (!has_checksums)
    SKEW_INFO(
        "checkpoint shard " << path
                            << " has no checksums (written before they were recorded): its bytes are not verified");
  for (const auto& [name, t] : shard.tensors) {
    if (has_checksums) {
      const auto it = shard.metadata.find(kChecksumPrefix + name);
      SKEW_CHECK(it != shard.metadata.end(),
                 "checkpoint shard " << path << ": tensor " << name << " has no recorded checksum");
      const std::string actual = crc32c_hex(t);
      if (actual != it->second)
        SKEW_THROW("checkpoint shard " << path << ": tensor " << name << " fails its checksum (crc32c " << actual
                                       << ", recorded " << it->second << "): the file is corrupt");
    }
    const std::int64_t bad = first_non_finite(t);
    if (bad >= 0)
      SKEW_THROW("checkpoint shard " << path << ": tensor " << name << " holds a non-finite value at element " << bad);
  }
  for (const auto& [key, value] : shard.metadata)
    SKEW_CHECK(key.rfind(kChecksumPrefix, 0) != 0 || shard.has(key.substr(std::string(kChecksumPrefix).size())),
               "checkpoint shard " << path << " records a checksum for tensor "
                                   << key.substr(std::string(kChecksumPrefix).size()) << ", which it does not hold");
}

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
  const int written = written_world_size(step);
  SKEW_CHECK(index.value("world_size", -1) == written,
             "checkpoint index " << path << " records world_size " << index.value("world_size", Json()).dump()
                                 << " but the step's marker says " << written);
  return index;
}

}  // namespace skew
