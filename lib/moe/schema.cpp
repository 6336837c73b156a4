#include "lib/moe/schema.hpp"

#include "core/error.hpp"
#include "lib/moe/models/bert.hpp"
#include "lib/moe/models/swin.hpp"
#include "lib/moe/placement_config.hpp"
#include "lib/moe/policies/fastermoe.hpp"
#include "lib/moe/policies/flexmoe.hpp"

namespace skew::moe {

Schema moe_train_schema() {
  Schema s("moe_train",
           "MoE transformer (GPT-style byte LM, BERT-style masked LM or Swin image classifier), experts spread "
           "over MPI ranks, with balancing policies");
  s.add_string("data.train", "", "training text file (bytes are tokens); empty = the built-in generated corpus");
  s.add_string("data.valid", "", "validation text file; empty = the last 10% of the training text");
  s.add_int("data.builtin_bytes", 200000, {2, std::int64_t{1} << 32}, "size of the built-in corpus in bytes");
  s.add_int("model.d_model", 64, {1, 1 << 16}, "embedding width");
  s.add_int("model.heads", 4, {1, 1 << 12}, "attention heads");
  s.add_int("model.layers", 2, {1, 1 << 10}, "transformer blocks");
  s.add_int("model.seq_len", 64, {1, 1 << 20}, "context length in bytes");
  s.add_int("model.d_ff", 128, {1, 1 << 20}, "hidden width of the dense FFN blocks (moe_every = 2)");
  s.add_int("model.moe_every", 1, {1, 2}, "1: every block's FFN is MoE; 2: every other block's");
  s.add_float("model.init_std", 0.1, FloatRange::at_least(0), "stddev of the normal weight init");
  s.add_choice("model.arch", "gpt", {"gpt", "bert", "swin"},
               "gpt: byte-level causal decoder, next-byte cross-entropy; bert: bidirectional encoder, masked-LM "
               "cross-entropy and accuracy on the chosen positions only (bert.* keys; a mask token after the 256 "
               "bytes); swin: Swin-MoE image classifier (swin.* keys)");
  BertModel::add_keys(s);
  SwinModel::add_keys(s);
  s.add_int("moe.num_experts", 4, {1, 1 << 16}, "experts per MoE layer (a multiple of the rank count)");
  s.add_int("moe.top_k", 1, {1, 1 << 16}, "experts per token");
  s.add_int("moe.d_ff", 128, {1, 1 << 20}, "hidden width of each expert FFN");
  s.add_float("moe.aux_weight", 0.01, FloatRange::at_least(0), "weight of the GShard/Switch balance loss");
  s.add_float("moe.z_weight", 0.001, FloatRange::at_least(0), "weight of the router z-loss");
  s.add_float("moe.jitter", 0.0, {0, 1, false, true}, "multiplicative gate-input noise U(1-j, 1+j) while training");
  s.add_choice("moe.policy", "static", {"static", "deepspeed", "fastermoe", "flexmoe"},
               "static: one replica per expert, dropless; deepspeed: capacity factor; fastermoe: shadow hot experts; "
               "flexmoe: dynamic expert replication and placement ([placement] keys)");
  s.add_int("moe.fastermoe_chunks", 1, {0, 64},
            "fastermoe: smart schedule (FasterMoE, PPoPP'22, Sec. 4): the token exchange runs as pairwise "
            "stages (rank + s for s = 0 .. ranks-1), each peer's rows in this many chunks, the exchange of the "
            "next chunk overlapping the expert compute of the current one, forward and backward; 0 = one "
            "all-to-all, then the compute. The rows computed are the same (float: OpenBLAS may round a row in a "
            "smaller GEMM differently, ~1e-7); the shadow choice models the stages as its pipeline groups");
  s.add_float("moe.capacity_factor", 1.0, FloatRange::above(0),
              "deepspeed: training capacity factor; capacity = max(ceil(tokens per rank / experts * factor * "
              "top_k), min_capacity) slots per expert and rank");
  s.add_float("moe.eval_capacity_factor", 1.0, FloatRange::above(0), "deepspeed: evaluation capacity factor");
  s.add_int("moe.min_capacity", 4, {0, kMaxInt32}, "deepspeed: least capacity per expert and rank");
  s.add_bool("moe.drop_tokens", true,
             "deepspeed: compute on the padded [experts, capacity, d_model] buffer, dropping assignments over "
             "capacity (false: dropless, every expert padded to the max load)");
  s.add_bool("moe.use_rts", true,
             "deepspeed, top-1: random token selection keeps a random choice of an overfull expert's tokens "
             "(false: the earliest)");
  s.add_choice("moe.drop_policy", "position", {"position", "probability"},
               "deepspeed: which assignments over capacity to drop where use_rts does not decide: position "
               "(top-2: first choices before second ones, then earlier tokens first) or probability (the least "
               "probable; overrides use_rts)");
  s.add_string("moe.save_trace", "", "write every token's expert choices to FILE.rank<r>");
  s.add_string("moe.replay_trace", "", "force the expert choices recorded in FILE.rank<r> (same config and ranks)");
  s.add_int("train.batch_size", 8, {1, 1 << 20}, "sequences per rank per iteration");
  s.add_int("train.iterations", 100, {1, kMaxInt64}, "training iterations");
  s.add_float("train.lr", 1e-2, FloatRange::above(0), "peak learning rate");
  s.add_float("train.min_lr_ratio", 0.1, {0, 1}, "final learning rate as a fraction of the peak (cosine)");
  s.add_int("train.warmup", 10, IntRange::at_least(0), "linear warmup iterations");
  s.add_float("train.weight_decay", 0.01, FloatRange::at_least(0), "AdamW decoupled weight decay (matrices only)");
  s.add_float("train.beta1", 0.9, {0, 1, false, true}, "AdamW beta1");
  s.add_float("train.beta2", 0.95, {0, 1, false, true}, "AdamW beta2");
  s.add_float("train.grad_clip", 1.0, FloatRange::at_least(0), "clip the global gradient norm to this (0 = off)");
  s.add_int("train.seed", 1, IntRange::at_least(0), "seed of weights, batches and jitter");
  s.add_int("train.eval_interval", 25, IntRange::at_least(0), "iterations between validation losses (and at the end)");
  s.add_int("train.eval_sequences", 32, {1, 1 << 24},
            "validation windows per evaluation, over all ranks (rounded down to a multiple of the ranks)");
  s.add_int("train.log_interval", 10, IntRange::at_least(0), "iterations between progress lines");
  s.add_int("train.blas_threads", 1, {0, 1024}, "OpenBLAS threads per rank (0 = OpenBLAS default)");
  s.add_choice(
      "train.device", "auto", {"auto", "cpu", "cuda"},
      "where the training step runs. cpu: all of it on the CPU. cuda (model.arch=gpt or bert, every "
      "moe.policy; swin is refused): each rank binds GPU "
      "local_rank % device_count and runs the whole step there (embedding, LayerNorms, attention, dense "
      "FFNs, the MoE layers' gate, dispatch, experts and combine, LM head, cross-entropy, their backward, "
      "the gradient norm and AdamW); the expert exchange and the dense gradients' all-reduce go over "
      "NCCL on device buffers (over MPI through pinned host memory where ranks share a GPU), counts "
      "and scalars over MPI. Still crossing each step: the token ids, bert's masked positions and targets and jitter "
      "noise (to the GPU), "
      "deepspeed's expert choices, per-expert counts and the logged scalars (loss, gradient norm, top-1 "
      "count; to the host); fastermoe's shadow broadcast and gradient "
      "reduce and flexmoe's replica moves (weights and AdamW moments) go GPU to GPU. Not yet run on a GPU. "
      "auto: cuda when the build has CUDA, a GPU is visible and model.arch is gpt or bert, else cpu (said in the log)");
  s.add_choice("train.precision", "fp32", {"fp32", "bf16"},
               "matrix products: fp32, or bf16 inputs with fp32 accumulation (mixed precision; the router, "
               "LayerNorm, softmax and the fp32 master weights, gradients and AdamW state are unchanged)");
  s.add_string("output.metrics", "", "JSONL file: one record per iteration (rank 0)");
  s.add_string("output.checkpoint_dir", "", "checkpoint directory (empty = none)");
  s.add_int("output.checkpoint_interval", 0, IntRange::at_least(0),
            "iterations between checkpoints (0 = only at the end when a dir is set)");
  s.add_int("output.keep", 2, {1, 1 << 20}, "checkpoints kept");
  s.add_bool("output.resume", false, "resume from the newest complete checkpoint in output.checkpoint_dir");
  add_placement_keys(s);
  return s;
}

Device train_device(const Config& c, int visible_gpus) {
  // Every moe.policy runs on the device (fastermoe's shadows and smart schedule, flexmoe's replica
  // moves included), so only the build, the GPUs and model.arch decide. BERT is GPT's network with
  // masked targets; Swin's network keeps its buffers on the host.
  const std::string requested = c.get_string("train.device"), arch = c.get_string("model.arch");
  const bool arch_on_gpu = arch == "gpt" || arch == "bert";
  if (requested == "cpu") return Device::Host;
  if (requested == "cuda") {
    SKEW_CHECK(cuda_built(),
               "train.device=cuda, but this build has no CUDA (configure with -DSKEW_CUDA=ON, or "
               "use train.device=cpu)");
    SKEW_CHECK(visible_gpus > 0,
               "train.device=cuda, but no CUDA device is visible to this rank (train.device=cpu "
               "or auto runs on the CPU)");
    SKEW_CHECK(arch_on_gpu,
               "train.device=cuda with model.arch=" << arch << ": the " << arch
                                                    << " network runs on the CPU only (model.arch=gpt "
                                                       "and bert run on the GPU; or use train.device=cpu)");
    return Device::Cuda;
  }
  return cuda_built() && visible_gpus > 0 && arch_on_gpu ? Device::Cuda : Device::Host;
}

MoeOptions moe_options(const Config& c) {
  MoeOptions e;
  e.d_ff = c.get_int_as<int>("moe.d_ff");
  e.gate.num_experts = c.get_int_as<int>("moe.num_experts");
  e.gate.top_k = c.get_int_as<int>("moe.top_k");
  SKEW_CHECK(e.gate.top_k <= e.gate.num_experts,
             "moe.top_k " << e.gate.top_k << " is more than moe.num_experts " << e.gate.num_experts);
  e.gate.aux_weight = c.get_float("moe.aux_weight");
  e.gate.z_weight = c.get_float("moe.z_weight");
  e.policy = parse_policy(c.get_string("moe.policy"));
  e.schedule_chunks = e.policy == Policy::FasterMoE ? c.get_int_as<int>("moe.fastermoe_chunks") : 0;
  e.capacity_factor_train = c.get_float("moe.capacity_factor");
  e.capacity_factor_eval = c.get_float("moe.eval_capacity_factor");
  e.min_capacity = c.get_int_as<std::int64_t>("moe.min_capacity");
  e.drop_tokens = c.get_bool("moe.drop_tokens");
  e.use_rts = c.get_bool("moe.use_rts");
  e.drop_by_probability = c.get_string("moe.drop_policy") == "probability";
  return e;
}

std::shared_ptr<BalancingPolicy<float>> policy_from_config(const Config& config, const MoeOptions& moe, int moe_layers,
                                                           comm::ProcessGroup& world) {
  if (moe.policy == Policy::FasterMoE)
    return make_fastermoe<float>(placement_options_from_config(config, moe.device), world, moe);
  if (moe.policy != Policy::FlexMoE) return make_policy<float>(moe);
  const int slots = slots_per_rank_from_config(config, moe.gate.num_experts, world.size());
  return make_flexmoe<float>(placement_options_from_config(config, moe.device), slots, world, moe_layers, moe);
}

}  // namespace skew::moe
