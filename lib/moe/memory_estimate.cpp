#include "lib/moe/memory_estimate.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <string>

namespace skew::moe {

namespace {
using I64 = std::int64_t;

// One block's dense parameters, as GptMoe and SwinMoe add them: LayerNorms (2 x 2D), attention
// (w_qkv, b_qkv, w_o, b_o), Swin's relative position bias (`bias` values), then the gate (D x E)
// of a MoE block or the dense FFN (w1, b1, w2, b2) of width F.
I64 block_params(I64 D, I64 F, I64 E, I64 bias, bool moe) {
  const I64 attention = 3 * D * D + 3 * D + D * D + D;
  return 4 * D + attention + bias + (moe ? D * E : 2 * D * F + F + D);
}

// One block's activations per token, kept for the backward pass (GptBlockActs): x_in, ln1, qkv
// (3D), att, x_mid, ln2 and the scratch branch, datt and dqkv (3D) make 12D; four LayerNorm
// statistics; the attention probabilities (heads x attended positions); a dense FFN's hpre, h
// and dh (3F). A MoE block instead sends top_k rows a token, each held in ten D-wide buffers
// (send, recv, xe, ye, back and their gradients) and three F-wide (hpre, h, dhpre) of the
// expert width: the rows a rank receives under balanced routing (a skewed one sends a rank up to
// moe.capacity_factor times its share, or more where tokens are not dropped).
I64 block_activations(I64 D, I64 F, I64 heads, I64 attended, bool moe, const MoeOptions& e) {
  const I64 shared = 12 * D + 4 + heads * attended;
  if (!moe) return shared + 3 * F;
  return shared + I64(e.gate.top_k) * (10 * I64(e.d_model) + 3 * I64(e.d_ff));
}

// The experts of one MoE layer on this rank: `slots` experts of 2 D F + F + D values each.
I64 layer_expert_params(const MoeOptions& e, int slots) {
  return I64(slots) * (2 * I64(e.d_model) * e.d_ff + e.d_ff + e.d_model);
}

double regular_file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? double(st.st_size) : 0.0;
}

// What the run's data will hold: the text files (or the built-in corpus) read whole; Swin's
// images as floats: MNIST's CSV holds at least two bytes a value ("0,"), so at most twice its
// size; generated digits are 28 x 28, for training and a quarter as many for validation.
MemoryPart data_part(const MoeTrainOptions& o) {
  const DataOptions& d = o.data;
  if (o.model.arch == "swin") {
    if (d.mnist_dir.empty())
      return {"images (data.generated_images)", (d.generated_images + std::max(d.generated_images / 4, 1)) * 784.0 * 4};
    const double csv = regular_file_bytes(d.mnist_dir + "/train.csv") + regular_file_bytes(d.mnist_dir + "/test.csv");
    return {"images (" + d.mnist_dir + "'s CSV as floats)", 2 * csv};
  }
  if (d.train.empty()) return {"text (data.builtin_bytes)", double(d.builtin_bytes)};
  const double bytes = regular_file_bytes(d.train) + regular_file_bytes(d.valid);
  return {"text " + d.train + (d.valid.empty() ? "" : " and " + d.valid), bytes};
}
}  // namespace

ModelMemory gpt_model_memory(const ModelOptions& m, int sequences, int slots) {
  const I64 D = m.d_model, F = m.d_ff, E = m.moe.gate.num_experts, V = m.vocab, S = m.seq_len;
  MoeOptions experts = m.moe;
  experts.d_model = m.d_model;
  ModelMemory mem;
  mem.dense_params = V * D + S * D + 2 * D;  // wte, wpe, lnf
  I64 per_token = 8 * D + 2 + 2 * V;         // x, dx, f, dln, x_final, lnf, head_in, dhead; logits and dlogits
  for (int l = 0; l < m.layers; ++l) {
    const bool moe = m.is_moe_block(l);
    mem.dense_params += block_params(D, F, E, 0, moe);
    if (moe) mem.expert_params += layer_expert_params(experts, slots);
    per_token += block_activations(D, F, m.heads, S, moe, experts);
  }
  mem.activation_values = I64(sequences) * S * per_token;
  return mem;
}

ModelMemory swin_model_memory(const ModelOptions& m, const SwinShape& shape, int images, int slots) {
  const I64 C = m.d_model, E = m.moe.gate.num_experts, K = I64(shape.patch) * shape.patch * shape.channels;
  const I64 r1 = shape.image / std::max(shape.patch, 1);
  MoeOptions experts = m.moe;
  experts.d_model = 2 * m.d_model;  // stage 2's width
  ModelMemory mem;
  mem.dense_params = K * C + 3 * C + 4 * C * 2 + 4 * C * 2 * C + 2 * C;     // patch embedding, merge
  mem.dense_params += 2 * (2 * C) + 2 * C * shape.classes + shape.classes;  // norm, head
  I64 activations = r1 * r1 * (K + 4 * C);                                  // patches and their embedding
  for (int s = 0; s < 2; ++s) {
    const I64 D = C << s, F = I64(m.d_ff) << s, heads = I64(m.heads) << s, res = r1 >> s;
    const I64 window = std::min<I64>(shape.window, res), span = 2 * window - 1;
    const int blocks = s == 0 ? shape.stage1_blocks : m.layers;
    for (int i = 0; i < blocks; ++i) {
      const bool moe = s == 1 && m.is_moe_block(i);
      mem.dense_params += block_params(D, F, E, span * span * heads, moe);
      if (moe) mem.expert_params += layer_expert_params(experts, slots);
      activations += res * res * block_activations(D, F, heads, window * window, moe, experts);
    }
  }
  mem.activation_values = I64(images) * activations;
  return mem;
}

std::vector<MemoryPart> memory_parts(const MoeTrainOptions& o, const ModelMemory& model) {
  const double param_bytes = double(model.params()) * sizeof(float);
  const std::string counts =
      std::to_string(model.dense_params) + " dense + " + std::to_string(model.expert_params) + " expert values";
  return {{"parameters and gradients (" + counts + ")", 2 * param_bytes},
          {"AdamW's two moments", 2 * param_bytes},
          {"activations of train.batch_size = " + std::to_string(o.train.batch_size),
           double(model.activation_values) * sizeof(float)},
          data_part(o)};
}

void check_model_memory(const MoeTrainOptions& o, const ModelOptions& m, int slots) {
  SwinShape shape;
  shape.patch = o.swin.patch, shape.window = o.swin.window, shape.stage1_blocks = o.swin.stage1_blocks;
  const ModelMemory model = o.model.arch == "swin" ? swin_model_memory(m, shape, o.train.batch_size, slots)
                                                   : gpt_model_memory(m, o.train.batch_size, slots);
  const std::string remedy =
      "lower model.d_model, model.layers, moe.num_experts (or launch more ranks), moe.d_ff, model.d_ff, "
      "train.batch_size or model.seq_len" +
      std::string(o.model.arch == "swin" ? " (swin: swin.stage1_blocks, swin.stage2_blocks)"
                                         : ", or give a smaller text file");
  std::vector<MemoryPart> parts = memory_parts(o, model);
  // On a GPU the model, its optimizer state and activations live in device memory, which
  // MemAvailable does not measure (a device allocation that fails names its buffer): the host
  // holds the data alone.
  if (m.device == Device::Cuda) parts.erase(parts.begin(), parts.end() - 1);
  require_memory("moe_train", parts, {o.data.max_memory_mb, "data.max_memory_mb", remedy});
}

}  // namespace skew::moe
