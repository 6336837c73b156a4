// moe_train's memory, estimated from its keys before the model is built (issue 38): the values
// the network will allocate on this rank, so Session can refuse a run that cannot fit with
// require_memory (core/memory_limits.hpp) before it builds the model or reads the text.
#pragma once
#include <cstdint>
#include <vector>

#include "core/memory_limits.hpp"
#include "lib/moe/models/network.hpp"
#include "lib/moe/models/swin_network.hpp"
#include "lib/moe/options.hpp"

namespace skew::moe {

// Counts of T values (float in moe_train) on one rank.
struct ModelMemory {
  // Exactly what the network allocates: the dense segments (embeddings or patch embedding,
  // attention, LayerNorms, dense FFNs, gates, head) and the experts of this rank's slots.
  std::int64_t dense_params = 0, expert_params = 0;
  // Approximate: one training step's activations and their gradients (see activation_values).
  std::int64_t activation_values = 0;
  std::int64_t params() const { return dense_params + expert_params; }
};

// GptMoe's (and BERT's, the same network) values for `sequences` sequences a step; slots: the
// expert slots a rank holds in each MoE layer: num_experts / ranks, or flexmoe's placement slots,
// which its replicas fill once the planner moves them (the most the rank holds).
ModelMemory gpt_model_memory(const ModelOptions& m, int sequences, int slots);
// SwinMoe's for `images` images a step, of `shape` (its image side, channels and classes).
ModelMemory swin_model_memory(const ModelOptions& m, const SwinShape& shape, int images, int slots);

// The parts require_memory adds up: parameters and gradients, AdamW's two moments, activations,
// and the text files read whole.
std::vector<MemoryPart> memory_parts(const MoeTrainOptions& o, const ModelMemory& model);

// Refuses (before anything is allocated) a run whose model on this rank, optimizer state,
// activations and text files exceed data.max_memory_mb or MemAvailable, naming the keys that
// lower them; on a GPU (m.device) the host's part is the data alone.
void check_model_memory(const MoeTrainOptions& o, const ModelOptions& m, int slots);

}  // namespace skew::moe
