#include "apps/moe_train_options.hpp"

#include "apps/placement_options.hpp"
#include "apps/run_dir.hpp"

namespace skew {

namespace {

// data.*, model.* and the keys of the bert and swin families.
void add_model_keys(Schema& s) {
  s.add_string("data.train", "", "training text file (bytes are tokens); empty = the built-in generated corpus");
  s.add_string("data.valid", "", "validation text file; empty = the last 10% of the training text");
  s.add_int("data.builtin_bytes", 200000, {2, std::int64_t{1} << 32}, "size of the built-in corpus in bytes");
  s.add_int("data.max_memory_mb", 0, {0, std::int64_t{1} << 24},
            "a cap in MiB on what a rank holds: its model (parameters, gradients, AdamW's moments, a step's "
            "activations, estimated from the model keys before it is built; not on a GPU, train.device) and the text "
            "held whole (data.train, "
            "data.valid), checked before either is made or read (a pipe: as it is read); 0 = what /proc/meminfo's "
            "MemAvailable says; a device (/dev/zero) is refused");
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
  s.add_float("bert.mask_prob", 0.15, {0, 1, true, false},
              "bert: probability that a position is chosen for the masked-LM objective");
  s.add_float("bert.mask_token_prob", 0.8, {0, 1},
              "bert: share of chosen positions whose input becomes the mask token");
  s.add_float("bert.random_token_prob", 0.1, {0, 1},
              "bert: share of chosen positions whose input becomes a uniformly random byte (the rest keep "
              "theirs; mask_token_prob + random_token_prob <= 1)");
  s.add_string("data.mnist_dir", "",
               "swin: directory with MNIST's train.csv and test.csv (scripts/fetch_data.sh mnist; test.csv "
               "is the held-out split); empty = a generated image set");
  s.add_int("data.generated_images", 4000, {1, kMaxInt32},
            "swin without data.mnist_dir: training images generated (and a quarter as many held out): 10 classes "
            "of random 7x7 patterns scaled to 28x28, shifted by up to 2 pixels, with pixel noise");
  s.add_int("swin.patch", 2, {1, 1 << 10}, "swin: patch size (the embedding's stride); the patch grid must be even");
  s.add_int("swin.window", 7, {1, 1 << 10},
            "swin: attention window (a stage whose map is no wider attends in one window, unshifted)");
  s.add_int("swin.stage1_blocks", 2, {1, 1 << 10}, "swin: blocks of stage 1 (width model.d_model, dense FFNs)");
  s.add_int("swin.stage2_blocks", 2, {1, 1 << 10},
            "swin: blocks of stage 2 (width 2 * model.d_model, 2 * model.heads heads), MoE FFN per model.moe_every; "
            "swin ignores model.layers and model.seq_len, and train.batch_size and train.eval_sequences count images");
}

// moe.*: experts, gate and the balancing policies' knobs.
void add_moe_keys(Schema& s) {
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
  s.add_string("moe.save_trace", "",
               "write every token's expert choices to FILE.rank<r>, after a header line of what a replay depends on");
  s.add_string("moe.replay_trace", "",
               "force the expert choices recorded in FILE.rank<r>; its header's model.arch, moe.top_k, "
               "moe.num_experts, MoE layers, ranks, train.batch_size, model.seq_len and train.seed must be this run's");
}

// train.* and output.*.
void add_train_keys(Schema& s) {
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
  s.add_int("train.blas_threads", 1, {0, 1024},
            "OpenBLAS threads per rank (0 = OpenBLAS default; more than 8 per CPU of the machine is capped there, with "
            "a warning)");
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
  add_run_dir_key(s, "config.ini, summary.json, metrics and checkpoints");
  s.add_string("output.metrics", "{run}/metrics.jsonl", "JSONL file: one record per iteration (rank 0); empty = none");
  s.add_string("output.checkpoint_dir", "{run}/checkpoints",
               "checkpoint directory (empty = none); the last iteration's checkpoint is what output.resume continues");
  s.add_int("output.checkpoint_interval", 0, IntRange::at_least(0),
            "iterations between checkpoints (0 = only at the end when a dir is set)");
  s.add_int("output.keep", 2, {1, 1 << 20}, "checkpoints kept");
  s.add_bool("output.resume", false, "resume from the newest complete checkpoint in output.checkpoint_dir");
}

}  // namespace

Schema moe_train_schema() {
  Schema s("moe_train",
           "MoE transformer (GPT-style byte LM, BERT-style masked LM or Swin image classifier), experts spread "
           "over MPI ranks, with balancing policies");
  add_model_keys(s);
  add_moe_keys(s);
  add_train_keys(s);
  add_placement_keys(s);
  return s;
}

namespace {

moe::DataOptions data_options(const Config& c) {
  moe::DataOptions d;
  d.train = c.get_string("data.train");
  d.valid = c.get_string("data.valid");
  d.builtin_bytes = c.get_int("data.builtin_bytes");
  d.max_memory_mb = c.get_int("data.max_memory_mb");
  d.mnist_dir = c.get_string("data.mnist_dir");
  d.generated_images = c.get_int_as<int>("data.generated_images");
  return d;
}

moe::ModelSection model_section(const Config& c) {
  moe::ModelSection m;
  m.d_model = c.get_int_as<int>("model.d_model");
  m.heads = c.get_int_as<int>("model.heads");
  m.layers = c.get_int_as<int>("model.layers");
  m.seq_len = c.get_int_as<int>("model.seq_len");
  m.d_ff = c.get_int_as<int>("model.d_ff");
  m.moe_every = c.get_int_as<int>("model.moe_every");
  m.init_std = c.get_float("model.init_std");
  m.arch = c.get_string("model.arch");
  return m;
}

moe::MoeSection moe_section(const Config& c) {
  moe::MoeSection m;
  m.num_experts = c.get_int_as<int>("moe.num_experts");
  m.top_k = c.get_int_as<int>("moe.top_k");
  m.d_ff = c.get_int_as<int>("moe.d_ff");
  m.aux_weight = c.get_float("moe.aux_weight");
  m.z_weight = c.get_float("moe.z_weight");
  m.jitter = c.get_float("moe.jitter");
  m.policy = c.get_string("moe.policy");
  m.fastermoe_chunks = c.get_int_as<int>("moe.fastermoe_chunks");
  m.capacity_factor = c.get_float("moe.capacity_factor");
  m.eval_capacity_factor = c.get_float("moe.eval_capacity_factor");
  m.min_capacity = c.get_int("moe.min_capacity");
  m.drop_tokens = c.get_bool("moe.drop_tokens");
  m.use_rts = c.get_bool("moe.use_rts");
  m.drop_policy = c.get_string("moe.drop_policy");
  m.save_trace = c.get_string("moe.save_trace");
  m.replay_trace = c.get_string("moe.replay_trace");
  return m;
}

moe::TrainSection train_section(const Config& c) {
  moe::TrainSection t;
  t.batch_size = c.get_int_as<int>("train.batch_size");
  t.iterations = c.get_int("train.iterations");
  t.lr = c.get_float("train.lr");
  t.min_lr_ratio = c.get_float("train.min_lr_ratio");
  t.warmup = c.get_int("train.warmup");
  t.weight_decay = c.get_float("train.weight_decay");
  t.beta1 = c.get_float("train.beta1");
  t.beta2 = c.get_float("train.beta2");
  t.grad_clip = c.get_float("train.grad_clip");
  t.seed = c.get_int_as<std::uint64_t>("train.seed");
  t.eval_interval = c.get_int("train.eval_interval");
  t.eval_sequences = c.get_int("train.eval_sequences");
  t.log_interval = c.get_int("train.log_interval");
  t.blas_threads = c.get_int_as<int>("train.blas_threads");
  t.device = c.get_string("train.device");
  t.precision = c.get_string("train.precision");
  return t;
}

moe::OutputOptions output_options(const Config& c, const std::string& run_dir) {
  check_resume_names_a_run(c);
  moe::OutputOptions o;
  o.metrics = in_run_dir(c.get_string("output.metrics"), run_dir);
  o.checkpoint_dir = in_run_dir(c.get_string("output.checkpoint_dir"), run_dir);
  o.checkpoint_interval = c.get_int("output.checkpoint_interval");
  o.keep = c.get_int_as<int>("output.keep");
  o.resume = c.get_bool("output.resume");
  return o;
}

}  // namespace

moe::MoeTrainOptions moe_train_options(const Config& c, const std::string& run_dir) {
  moe::MoeTrainOptions o;
  o.data = data_options(c);
  o.model = model_section(c);
  o.bert = {.mask_prob = c.get_float("bert.mask_prob"),
            .mask_token_prob = c.get_float("bert.mask_token_prob"),
            .random_token_prob = c.get_float("bert.random_token_prob")};
  o.swin = {.patch = c.get_int_as<int>("swin.patch"),
            .window = c.get_int_as<int>("swin.window"),
            .stage1_blocks = c.get_int_as<int>("swin.stage1_blocks"),
            .stage2_blocks = c.get_int_as<int>("swin.stage2_blocks")};
  o.moe = moe_section(c);
  o.train = train_section(c);
  o.output = output_options(c, run_dir);
  o.placement = placement_settings(c);
  return o;
}

}  // namespace skew
