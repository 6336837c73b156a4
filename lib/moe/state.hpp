// The trainer's persistent state as named tensors (checkpoints) and as the per-expert view the
// placement executor moves between ranks (ExpertStateStore).
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.hpp"
#include "core/safetensors.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/moe/options.hpp"
#include "lib/placement/policy.hpp"

namespace skew::moe {

// dense.{w,m,v}; moe<l>.placement ([replicas, 3] f64: expert, rank, share); moe<l>.e<e>.{w,m,v}
// for the replicas this rank holds.
std::vector<std::pair<std::string, Tensor>> save_state(MoeNetwork<float>& model, AdamW& adam);
// Restores the above, including each layer's placement and the replicas it puts on this rank.
void load_state(const TensorFile& file, MoeNetwork<float>& model, AdamW& adam, int rank);
// Re-sharding at another world size: the dense state and the experts (with their AdamW moments)
// that the model's own placement puts on `rank`, each found by `get` wherever it was saved; the
// placements stay the model's. `get` throws naming a tensor it cannot find.
using TensorLookup = std::function<const Tensor&(const std::string& name)>;
void load_state_resharded(const TensorLookup& get, MoeNetwork<float>& model, AdamW& adam, int rank);
// The checkpoint name of MoE layer `layer`'s expert `e` state: what = "w", "m" or "v".
std::string expert_tensor_name(std::size_t layer, int e, const char* what);

// The keys that decide what a checkpoint's tensors mean: model.arch and the shape keys of that
// family ({"model.arch": "bert", "model.d_model": 64, ...}). Tensor shapes alone cannot tell a
// BERT checkpoint from a GPT one of the same size, so the index records these.
Json model_keys(const MoeTrainOptions& options);
// Empty when `index` was written under `keys` (or predates the record: older indexes have no
// "model" and are checked by their tensors alone); else the error naming the first differing key
// and both values.
std::string model_mismatch(const Json& index, const std::string& index_path, const Json& keys);

// The checkpoint index (collective; the result is complete on rank 0, which writes it):
// {"policy", "model": model_keys(), "placement": [per MoE layer, LayerPlacement::to_string()],
// "tensors": {name: {"dtype", "shape", "files": [the shards holding it]}}}. `shard` is this
// rank's tensors.
Json checkpoint_index(comm::ProcessGroup& world, const std::vector<std::pair<std::string, Tensor>>& shard,
                      const std::string& policy, const Json& model_keys, MoeNetwork<float>& model);
// Before loading: the index was written under `policy` and lists exactly the tensors of this
// rank's shard `file` (named `shard_name`) with their dtypes and shapes. After loading: the
// model's placements are the index's. Throws naming the index, tensor and fault.
void check_index_before_load(const Json& index, const std::string& index_path, const TensorFile& file,
                             const std::string& shard_name, const std::string& policy);
void check_index_after_load(const Json& index, const std::string& index_path, MoeNetwork<float>& model);

class ModelExpertStore : public placement::ExpertStateStore {
 public:
  explicit ModelExpertStore(MoeNetwork<float>& model) : model_(model) {}
  std::vector<Tensor*> replica_state(int layer, int expert) override;
  void create_replica(int layer, int expert) override;
  void drop_replica(int layer, int expert) override;

 private:
  MoeNetwork<float>& model_;
};

}  // namespace skew::moe
