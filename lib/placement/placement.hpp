// The contract between the MoE runtime (lib/moe) and the placement module (lib/placement):
// where each expert's replicas live and how its tokens are split among them. Routing never
// depends on it: the gate picks experts, the placement only decides which replica computes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace skew::placement {

struct Replica {
  int rank = 0;        // the rank whose slot holds this replica
  double share = 1.0;  // fraction of the expert's tokens it computes; an expert's shares sum to 1
};

// One MoE layer's placement over `world_size` ranks with `slots_per_rank` slots each.
struct LayerPlacement {
  int world_size = 1;
  int slots_per_rank = 1;
  std::vector<std::vector<Replica>> experts;  // experts[e] = its replicas, ordered by rank

  int num_experts() const { return static_cast<int>(experts.size()); }
  // Experts with a replica on `rank` (ascending expert id): the rank's local experts.
  std::vector<int> experts_on(int rank) const;
  int replicas_on(int rank) const;
  // Throws skew::Error naming the fault: a rank over its slots, shares not summing to 1,
  // an expert without replica, two replicas of one expert on one rank, a rank out of range.
  void validate() const;
  // Deterministic text form, used to check that all ranks agree and to log changes.
  std::string to_string() const;
  bool operator==(const LayerPlacement& other) const;

  // The default: expert e on rank e / (E / N) (contiguous blocks), one replica each.
  static LayerPlacement block(int num_experts, int world_size, int slots_per_rank);
};

// Splits `count` tokens of one expert among its replicas by their shares, deterministically:
// floor of each share, the remainder to replicas in order of largest fractional part (ties to
// the lower index). Every rank computes the same split from the same counts.
std::vector<std::int64_t> split_tokens(std::int64_t count, const std::vector<Replica>& replicas);

}  // namespace skew::placement
