// The trainer's persistent state as named tensors (checkpoints) and as the per-expert view the
// placement executor moves between ranks (ExpertStateStore).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "lib/core/safetensors.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/placement/policy.hpp"

namespace skew::moe {

// dense.{w,m,v}; moe<l>.placement ([replicas, 3] f64: expert, rank, share); moe<l>.e<e>.{w,m,v}
// for the replicas this rank holds.
std::vector<std::pair<std::string, Tensor>> save_state(GptMoe<float>& model, AdamW& adam);
// Restores the above, including each layer's placement and the replicas it puts on this rank.
void load_state(const TensorFile& file, GptMoe<float>& model, AdamW& adam, int rank);

class ModelExpertStore : public placement::ExpertStateStore {
 public:
  explicit ModelExpertStore(GptMoe<float>& model) : model_(model) {}
  std::vector<Tensor*> replica_state(int layer, int expert) override;
  void create_replica(int layer, int expert) override;
  void drop_replica(int layer, int expert) override;

 private:
  GptMoe<float>& model_;
};

}  // namespace skew::moe
