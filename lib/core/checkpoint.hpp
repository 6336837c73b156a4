// Step-numbered checkpoint directories: DIR/step_00000123/rank_00000.safetensors per rank, and
// a COMPLETE marker written by rank 0 after every rank has written (the caller puts a barrier
// between write and commit). Only complete steps are resumed from; `keep` most recent are kept.
// The marker records the world size so a resume with another size is refused clearly. An
// optional index (index.json: step, world size, each tensor -> shard files, dtype, shape, plus
// whatever the caller records) is written by rank 0 after every shard and before the marker.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/metrics.hpp"
#include "lib/core/safetensors.hpp"

namespace skew {

class CheckpointDir {
 public:
  CheckpointDir(std::string dir, int rank, int world_size, int keep);

  std::string rank_file(std::int64_t step) const;
  // Every rank: writes its shard (atomically).
  void write_shard(std::int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   std::map<std::string, std::string> metadata) const;
  // Rank 0 only, after a barrier: marks the step complete and prunes old steps.
  void commit(std::int64_t step) const;
  // Newest complete step, or -1. Throws if it was written by a different world size.
  std::int64_t latest_complete() const;
  TensorFile read_shard(std::int64_t step) const;
  // The shard file name of `rank` inside a step directory.
  static std::string shard_name(int rank);

  // {name: {"dtype", "shape"}}: one shard's part of an index.
  static Json describe_tensors(const std::vector<std::pair<std::string, Tensor>>& tensors);
  std::string index_file(std::int64_t step) const;
  // Rank 0 only, after a barrier and before commit(): writes `index` plus "step" and
  // "world_size" atomically.
  void write_index(std::int64_t step, Json index) const;
  // Throws naming the file when it is missing or not JSON, or when its step or world size are
  // not this checkpoint's.
  Json read_index(std::int64_t step) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string step_dir(std::int64_t step) const;
  std::vector<std::int64_t> complete_steps() const;
  std::vector<std::int64_t> step_numbers(bool complete_only) const;
  std::string dir_;
  int rank_, world_size_, keep_;
};

}  // namespace skew
