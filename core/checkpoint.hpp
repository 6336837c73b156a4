// Step-numbered checkpoint directories: DIR/step_00000123/rank_00000.safetensors per rank, and
// a COMPLETE marker written by rank 0 after every rank has written (the caller puts a barrier
// between write and commit). Only complete steps are resumed from; `keep` most recent are kept.
// The marker records the world size, so a resume with another size is refused clearly or (moe)
// re-shards. Every shard records the CRC-32C of each tensor's bytes in its metadata
// ("crc32c:<tensor>"), and reading a shard verifies them and rejects NaN/inf in float tensors;
// a shard written before checksums existed (no such keys) loads unverified, with an INFO line.
// Pruning an old step deletes its marker first (synced), so a kill mid-prune leaves at worst an
// unmarked step, which is ignored and cleared by the next commit. An
// optional index (index.json: step, world size, each tensor -> shard files, dtype, shape, plus
// whatever the caller records) is written by rank 0 after every shard and before the marker.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.hpp"
#include "core/safetensors.hpp"

namespace skew {

class CheckpointDir {
 public:
  CheckpointDir(std::string dir, int rank, int world_size, int keep);

  std::string rank_file(std::int64_t step) const;
  // Every rank: writes its shard (atomically), with each tensor's checksum.
  void write_shard(std::int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   std::map<std::string, std::string> metadata) const;
  // Rank 0 only, after a barrier: marks the step complete and prunes old steps.
  void commit(std::int64_t step) const;
  // Rank 0 only: removes a step's marker (durably), so no resume picks it; its files stay until
  // a later commit clears them or the step is written again.
  void unmark(std::int64_t step) const;
  // Newest complete step, or -1. Throws if it was written by a different world size.
  std::int64_t latest_complete() const;
  // The complete steps, oldest first, whatever world size wrote them.
  std::vector<std::int64_t> complete_steps() const;
  // The world size recorded in a complete step's marker; throws naming the marker if unreadable.
  int written_world_size(std::int64_t step) const;
  // Throws, naming both sizes, when a complete step was written by another world size.
  void require_this_world_size(std::int64_t step) const;
  // This rank's shard, or (re-sharding at another world size) any rank's: checksums verified,
  // non-finite float values rejected; throws naming the file and tensor at fault.
  TensorFile read_shard(std::int64_t step) const { return read_shard(step, rank_); }
  TensorFile read_shard(std::int64_t step, int rank) const;
  std::string shard_file(std::int64_t step, int rank) const;
  // The checks read_shard makes, on a shard already parsed from `path`.
  static void verify_shard(const TensorFile& shard, const std::string& path);
  // Records each tensor's checksum in `metadata`, as write_shard does: lets other safetensors
  // files (wide_train's model) be written so that verify_shard checks them.
  static void add_checksums(const std::vector<std::pair<std::string, Tensor>>& tensors,
                            std::map<std::string, std::string>& metadata);
  // The shard file name of `rank` inside a step directory.
  static std::string shard_name(int rank);

  // {name: {"dtype", "shape"}}: one shard's part of an index.
  static Json describe_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors);
  std::string index_file(std::int64_t step) const;
  // Rank 0 only, after a barrier and before commit(): writes `index` plus "step" and
  // "world_size" atomically.
  void write_index(std::int64_t step, Json index) const;
  // Throws naming the file when it is missing or not JSON, or when its step or world size are
  // not the step's (its marker's world size).
  Json read_index(std::int64_t step) const;
  const std::string& dir() const { return dir_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  std::string step_dir(std::int64_t step) const;
  std::vector<std::int64_t> step_numbers(bool complete_only) const;
  void prune(std::int64_t step) const;
  std::string dir_;
  int rank_, world_size_, keep_;
};

}  // namespace skew
