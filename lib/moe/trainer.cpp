#include "lib/moe/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "kernels/gemm.hpp"
#include "kernels/moe_threads.hpp"
#include "lib/core/checkpoint.hpp"
#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/core/timer.hpp"
#include "lib/moe/corpus.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/moe/placement_config.hpp"
#include "lib/moe/state.hpp"
#include "lib/placement/flexmoe.hpp"
#include "lib/placement/policy.hpp"

namespace skew::moe {

Schema moe_train_schema() {
  Schema s("moe_train", "GPT-style MoE language model, experts spread over MPI ranks, with balancing policies");
  s.add_string("data.train", "", "training text file (bytes are tokens); empty = the built-in generated corpus");
  s.add_string("data.valid", "", "validation text file; empty = the last 10% of the training text");
  s.add_int("data.builtin_bytes", 200000, "size of the built-in corpus in bytes");
  s.add_int("model.d_model", 64, "embedding width");
  s.add_int("model.heads", 4, "attention heads");
  s.add_int("model.layers", 2, "transformer blocks");
  s.add_int("model.seq_len", 64, "context length in bytes");
  s.add_int("model.d_ff", 128, "hidden width of the dense FFN blocks (moe_every = 2)");
  s.add_int("model.moe_every", 1, "1: every block's FFN is MoE; 2: every other block's");
  s.add_float("model.init_std", 0.1, "stddev of the normal weight init");
  s.add_int("moe.num_experts", 4, "experts per MoE layer (a multiple of the rank count)");
  s.add_int("moe.top_k", 1, "experts per token");
  s.add_int("moe.d_ff", 128, "hidden width of each expert FFN");
  s.add_float("moe.aux_weight", 0.01, "weight of the GShard/Switch balance loss");
  s.add_float("moe.z_weight", 0.001, "weight of the router z-loss");
  s.add_float("moe.jitter", 0.0, "multiplicative gate-input noise U(1-j, 1+j) while training");
  s.add_choice("moe.policy", "static", {"static", "deepspeed", "fastermoe", "flexmoe"},
               "static: one replica per expert, dropless; deepspeed: capacity factor; fastermoe: shadow hot experts; "
               "flexmoe: dynamic expert replication and placement ([placement] keys)");
  s.add_float("moe.capacity_factor", 1.0, "deepspeed: training capacity factor");
  s.add_float("moe.eval_capacity_factor", 2.0, "deepspeed: evaluation capacity factor");
  s.add_bool("moe.drop_tokens", true, "deepspeed: drop tokens over capacity (false: pad every expert to the max load)");
  s.add_choice("moe.drop_policy", "position", {"position", "probability"},
               "deepspeed: which tokens over capacity to drop");
  s.add_float("moe.fastermoe_gflops", 20.0, "fastermoe cost model: expert GEMM throughput per rank");
  s.add_float("moe.fastermoe_gbps", 5.0, "fastermoe cost model: network bandwidth per rank");
  s.add_string("moe.save_trace", "", "write every token's expert choices to FILE.rank<r>");
  s.add_string("moe.replay_trace", "", "force the expert choices recorded in FILE.rank<r> (same config and ranks)");
  s.add_int("train.batch_size", 8, "sequences per rank per iteration");
  s.add_int("train.iterations", 100, "training iterations");
  s.add_float("train.lr", 1e-2, "peak learning rate");
  s.add_float("train.min_lr_ratio", 0.1, "final learning rate as a fraction of the peak (cosine)");
  s.add_int("train.warmup", 10, "linear warmup iterations");
  s.add_float("train.weight_decay", 0.01, "AdamW decoupled weight decay (matrices only)");
  s.add_float("train.beta1", 0.9, "AdamW beta1");
  s.add_float("train.beta2", 0.95, "AdamW beta2");
  s.add_float("train.grad_clip", 1.0, "clip the global gradient norm to this (0 = off)");
  s.add_int("train.seed", 1, "seed of weights, batches and jitter");
  s.add_int("train.eval_interval", 25, "iterations between validation losses (and at the end)");
  s.add_int("train.eval_sequences", 32, "validation windows per evaluation, over all ranks");
  s.add_int("train.log_interval", 10, "iterations between progress lines");
  s.add_int("train.blas_threads", 1, "OpenBLAS threads per rank (0 = OpenBLAS default)");
  s.add_choice("train.precision", "fp32", {"fp32", "bf16"},
               "matrix products: fp32, or bf16 inputs with fp32 accumulation (mixed precision; the router, "
               "LayerNorm, softmax and the fp32 master weights, gradients and AdamW state are unchanged)");
  s.add_string("output.metrics", "", "JSONL file: one record per iteration (rank 0)");
  s.add_string("output.checkpoint_dir", "", "checkpoint directory (empty = none)");
  s.add_int("output.checkpoint_interval", 0, "iterations between checkpoints (0 = only at the end when a dir is set)");
  s.add_int("output.keep", 2, "checkpoints kept");
  s.add_bool("output.resume", false, "resume from the newest complete checkpoint in output.checkpoint_dir");
  add_placement_keys(s);
  return s;
}

namespace {

struct Run {
  ModelOptions model;
  AdamWOptions adam;
  int batch = 8;
  std::int64_t iterations = 0;
  std::uint64_t seed = 1;
};

Run read_options(const Config& c) {
  Run r;
  ModelOptions& m = r.model;
  m.d_model = static_cast<int>(c.get_int("model.d_model"));
  m.heads = static_cast<int>(c.get_int("model.heads"));
  m.layers = static_cast<int>(c.get_int("model.layers"));
  m.seq_len = static_cast<int>(c.get_int("model.seq_len"));
  m.d_ff = static_cast<int>(c.get_int("model.d_ff"));
  m.moe_every = static_cast<int>(c.get_int("model.moe_every"));
  SKEW_CHECK(m.moe_every == 1 || m.moe_every == 2, "model.moe_every must be 1 or 2, got " << m.moe_every);
  m.init_std = c.get_float("model.init_std");
  m.jitter = c.get_float("moe.jitter");
  m.precision = parse_precision(c.get_string("train.precision"));
  MoeOptions& e = m.moe;
  e.d_ff = static_cast<int>(c.get_int("moe.d_ff"));
  e.gate.num_experts = static_cast<int>(c.get_int("moe.num_experts"));
  e.gate.top_k = static_cast<int>(c.get_int("moe.top_k"));
  SKEW_CHECK(e.gate.top_k >= 1 && e.gate.top_k <= e.gate.num_experts,
             "moe.top_k " << e.gate.top_k << " must be in [1, moe.num_experts]");
  e.gate.aux_weight = c.get_float("moe.aux_weight");
  e.gate.z_weight = c.get_float("moe.z_weight");
  e.policy = parse_policy(c.get_string("moe.policy"));
  e.capacity_factor_train = c.get_float("moe.capacity_factor");
  e.capacity_factor_eval = c.get_float("moe.eval_capacity_factor");
  e.drop_tokens = c.get_bool("moe.drop_tokens");
  e.drop_by_probability = c.get_string("moe.drop_policy") == "probability";
  e.fastermoe_gflops = c.get_float("moe.fastermoe_gflops");
  e.fastermoe_gbps = c.get_float("moe.fastermoe_gbps");
  e.live_replica_shares = e.policy == Policy::FlexMoE && c.get_string("placement.shares") == "live";
  r.batch = static_cast<int>(c.get_int("train.batch_size"));
  r.iterations = c.get_int("train.iterations");
  r.seed = static_cast<std::uint64_t>(c.get_int("train.seed"));
  r.adam.lr = c.get_float("train.lr");
  r.adam.min_lr_ratio = c.get_float("train.min_lr_ratio");
  r.adam.warmup = c.get_int("train.warmup");
  r.adam.total = r.iterations;
  r.adam.weight_decay = c.get_float("train.weight_decay");
  r.adam.beta1 = c.get_float("train.beta1");
  r.adam.beta2 = c.get_float("train.beta2");
  r.adam.grad_clip = c.get_float("train.grad_clip");
  return r;
}

double max_over_mean(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
}

// Mean validation cross-entropy over `total` evenly spaced windows, split over the ranks.
double validate(GptMoe<float>& model, const ByteCorpus& valid, int batch, std::int64_t total,
                comm::ProcessGroup& world) {
  const std::int64_t per_rank = std::max<std::int64_t>(1, total / world.size());
  double sum = 0;
  int chunks = 0;
  for (std::int64_t first = 0; first < per_rank; first += batch, ++chunks) {
    const int count = static_cast<int>(std::min<std::int64_t>(batch, per_rank - first));
    std::vector<std::int32_t> tokens, targets;
    for (int i = 0; i < count; ++i)
      valid.window(world.rank() * per_rank + first + i, per_rank * world.size(), tokens, targets);
    StepInputs in;
    in.training = false;
    model.step(tokens.data(), targets.data(), count, in, false);
    sum += model.last_ce();
  }
  return sum / chunks;
}

}  // namespace

Json train(const Config& config, comm::ProcessGroup& world) {
  const Run run = read_options(config);
  if (config.get_int("train.blas_threads") > 0)
    kernels::moe::set_blas_threads(static_cast<int>(config.get_int("train.blas_threads")));
  const int N = world.size(), rank = world.rank();
  if (run.model.precision == Precision::Bf16 && rank == 0)
    SKEW_INFO("train.precision = bf16: matrix products on the CPU use " << kernels::gemm_bf16_host_path());
  const int E = run.model.moe.gate.num_experts, S = run.model.seq_len;
  SKEW_CHECK(E % N == 0, "moe.num_experts " << E << " is not a multiple of the " << N << " ranks");
  std::string text = config.get_string("data.train").empty()
                         ? builtin_corpus(static_cast<std::size_t>(config.get_int("data.builtin_bytes")), 12345)
                         : read_text(config.get_string("data.train"));
  std::string valid_text;
  if (!config.get_string("data.valid").empty()) {
    valid_text = read_text(config.get_string("data.valid"));
  } else {
    const std::size_t cut = text.size() - text.size() / 10;
    valid_text = text.substr(cut);
    text.resize(cut);
  }
  const ByteCorpus train_data(text, S), valid_data(valid_text, S);
  const double entropy = unigram_entropy(valid_text);

  const std::string policy_name = config.get_string("moe.policy");
  const bool flexmoe = run.model.moe.policy == Policy::FlexMoE;
  const int slots = flexmoe ? slots_per_rank_from_config(config, E, N) : E / N;
  std::vector<placement::LayerPlacement> placements(static_cast<std::size_t>(run.model.moe_layers()),
                                                    placement::LayerPlacement::block(E, N, slots));
  GptMoe<float> model(run.model, world, placements);
  model.init(run.seed);
  AdamW adam(run.adam, model, world);
  const int L = static_cast<int>(model.moe().size());
  ModelExpertStore store(model);
  std::unique_ptr<placement::PlacementPolicy> policy;
  if (flexmoe)
    policy = placement::make_flexmoe_policy(placement_options_from_config(config), world, L, E,
                                            model.options().moe.expert_params(), run.model.d_model);
  std::int64_t placement_changes = 0;
  const std::size_t choices =
      static_cast<std::size_t>(run.batch) * S * static_cast<std::size_t>(run.model.moe.gate.top_k);

  std::unique_ptr<CheckpointDir> ckpt;
  std::int64_t start = 0;
  if (!config.get_string("output.checkpoint_dir").empty()) {
    ckpt = std::make_unique<CheckpointDir>(config.get_string("output.checkpoint_dir"), rank, N,
                                           static_cast<int>(config.get_int("output.keep")));
    if (config.get_bool("output.resume") && ckpt->latest_complete() >= 0) {
      start = ckpt->latest_complete();
      const Json index = ckpt->read_index(start);
      const TensorFile shard = ckpt->read_shard(start);
      check_index_before_load(index, ckpt->index_file(start), shard, CheckpointDir::shard_name(rank), policy_name);
      load_state(shard, model, adam, rank);
      if (policy) policy->load_state(shard);
      check_index_after_load(index, ckpt->index_file(start), model);
      SKEW_INFO("resumed from " << ckpt->rank_file(start) << " at iteration " << start);
    }
  }
  const std::string suffix = ".rank" + std::to_string(rank);
  OutputFile save_trace;
  std::ifstream replay;
  if (!config.get_string("moe.save_trace").empty()) {
    save_trace.open(config.get_string("moe.save_trace") + suffix,
                    start > 0 ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
  }
  if (!config.get_string("moe.replay_trace").empty()) {
    replay.open(config.get_string("moe.replay_trace") + suffix, std::ios::binary);
    SKEW_CHECK(replay, "moe.replay_trace: cannot read " << config.get_string("moe.replay_trace") << suffix);
    replay.seekg(static_cast<std::streamoff>(start * L * choices * sizeof(std::int32_t)));
  }
  JsonlWriter metrics(rank == 0 ? config.get_string("output.metrics") : "");
  const std::int64_t eval_interval = config.get_int("train.eval_interval"),
                     log_interval = config.get_int("train.log_interval");
  const std::int64_t ckpt_interval = config.get_int("output.checkpoint_interval");

  double total_step_s = 0, total_ideal_s = 0, balance_sum = 0, last_val = NAN, last_loss = NAN;
  std::int64_t dropped_total = 0, padded_total = 0, measured = 0;
  std::vector<std::int32_t> tokens, targets;
  std::vector<std::vector<std::int32_t>> forced(static_cast<std::size_t>(L), std::vector<std::int32_t>(choices));
  for (std::int64_t it = start; it < run.iterations; ++it) {
    train_data.sample(run.seed, it, static_cast<std::int64_t>(rank) * run.batch, run.batch, tokens, targets);
    StepInputs in;
    in.training = true, in.iteration = it, in.seed = run.seed;
    if (replay.is_open()) {
      for (auto& f : forced) {
        replay.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(std::int32_t)));
        SKEW_CHECK(replay, "moe.replay_trace: " << config.get_string("moe.replay_trace") << suffix
                                                << " ends before iteration " << it);
        in.forced.push_back(f.data());
      }
    }
    for (auto& layer : model.moe()) layer->times() = LayerTimes{};
    Json change;
    // The step time includes planning and moving experts: that overhead is part of FlexMoE's cost.
    Timer step_timer;
    if (policy) {  // FlexMoE: re-place experts between iterations; routing is unchanged
      std::vector<placement::LayerPlacement> current;
      for (auto& layer : model.moe()) current.push_back(layer->placement());
      const auto next = policy->plan(it, current);
      if (next != current) {
        Timer move;
        const std::vector<double> sent = placement::apply_placement(world, store, current, next);
        for (std::size_t l = 0; l < next.size(); ++l) {
          model.moe()[l]->set_placement(next[l]);
          model.moe()[l]->times().move_bytes += sent[l];
        }
        change = {{"seconds", move.seconds()}, {"placement", Json::array()}};
        for (const auto& p : next) change["placement"].push_back(p.to_string());
        ++placement_changes;
      }
    }
    model.zero_grads();
    const double loss = model.step(tokens.data(), targets.data(), run.batch, in, true);
    model.sync_grads();
    const double grad_norm = adam.step(it);
    const double step_s = step_timer.seconds();
    last_loss = loss;
    Json prediction_error = Json::array();
    if (policy) {  // every rank must observe the same numbers: the slowest rank's step time
      placement::RoutingCounts counts;
      for (auto& layer : model.moe()) counts.push_back(layer->gate_state().global_counts);
      // How far the load the plan was made for lay from this step's load: sum over experts of
      // |estimate - count| / tokens, per layer (2 = every token elsewhere than predicted).
      const auto& monitor = dynamic_cast<const placement::FlexMoePolicy&>(*policy).monitor();
      for (std::size_t l = 0; l < counts.size() && !monitor.empty(); ++l) {
        double off = 0, tokens = 0;
        for (std::size_t e = 0; e < counts[l].size(); ++e) {
          off += std::abs(monitor.estimate(static_cast<int>(l))[e] - static_cast<double>(counts[l][e]));
          tokens += static_cast<double>(counts[l][e]);
        }
        prediction_error.push_back(tokens > 0 ? off / tokens : 0.0);
      }
      std::vector<double> slowest = {step_s};
      world.allreduce(comm::view(slowest), comm::ReduceOp::Max);
      policy->observe(it, counts, slowest[0]);
    }

    LayerTimes t;  // wall seconds by phase, summed over layers
    Json per_expert = Json::array(), balance = Json::array(), expert_balance = Json::array(), shadows = Json::array();
    // Per rank: per layer rows computed, expert CPU seconds, bytes sent in the all-to-all, in
    // replica/shadow sync and in placement moves; then the expert wall seconds of all layers.
    constexpr int kPerLayer = 5;
    const int W = kPerLayer * L + 1;
    std::vector<double> gathered(static_cast<std::size_t>(N) * W);
    std::vector<double> mine;
    std::int64_t dropped = 0, padded = 0;
    for (auto& layer : model.moe()) {
      const LayerTimes& lt = layer->times();
      t.gate += lt.gate, t.dispatch += lt.dispatch, t.expert += lt.expert;
      t.combine += lt.combine, t.alltoall += lt.alltoall;
      mine.insert(mine.end(), {static_cast<double>(layer->computed_rows()), lt.expert_cpu, lt.alltoall_bytes,
                               lt.sync_bytes, lt.move_bytes});
      const auto& counts = layer->gate_state().global_counts;
      per_expert.push_back(counts);
      expert_balance.push_back(max_over_mean(std::vector<double>(counts.begin(), counts.end())));
      shadows.push_back(layer->shadowed());
      dropped += layer->dropped(), padded += layer->padded();
      if (save_trace.is_open())
        save_trace.write(reinterpret_cast<const char*>(layer->gate_state().expert.data()),
                         static_cast<std::streamsize>(choices * sizeof(std::int32_t)));
    }
    mine.push_back(t.expert);
    world.allgather(comm::cview(mine), comm::view(gathered));
    const auto at = [&](int r, int l, int field) {
      return gathered[static_cast<std::size_t>(r) * W + static_cast<std::size_t>(l) * kPerLayer + field];
    };
    double expert_max = 0, expert_sum = 0;
    Json per_rank = {{"rows", Json::array()},
                     {"expert_cpu_s", Json::array()},
                     {"alltoall_bytes", Json::array()},
                     {"sync_bytes", Json::array()},
                     {"move_bytes", Json::array()}};
    const char* fields[kPerLayer] = {"rows", "expert_cpu_s", "alltoall_bytes", "sync_bytes", "move_bytes"};
    for (int r = 0; r < N; ++r) {
      const double expert_wall = gathered[static_cast<std::size_t>(r) * W + W - 1];
      expert_max = std::max(expert_max, expert_wall);
      expert_sum += expert_wall;
      for (int f = 0; f < kPerLayer; ++f) {
        Json values = Json::array();
        for (int l = 0; l < L; ++l) values.push_back(at(r, l, f));
        per_rank[fields[f]].push_back(values);
      }
    }
    double balance_mean = 0;
    for (int l = 0; l < L; ++l) {
      std::vector<double> rows;
      for (int r = 0; r < N; ++r) rows.push_back(at(r, l, 0));
      balance.push_back(max_over_mean(rows));
      balance_mean += max_over_mean(rows) / L;
    }
    // Balanced ideal: the same step with the expert work spread evenly over the ranks.
    const double ideal_s = step_s - expert_max + expert_sum / N;
    if (it > start) total_step_s += step_s, total_ideal_s += ideal_s, ++measured;  // first step warms caches
    balance_sum += balance_mean, dropped_total += dropped, padded_total += padded;

    Json rec = {{"iter", it},
                {"loss", loss},
                {"ce", model.last_ce()},
                {"lr", learning_rate(run.adam, it)},
                {"grad_norm", grad_norm},
                {"step_s", step_s},
                {"ideal_step_s", ideal_s},
                {"tokens_per_s", static_cast<double>(N) * run.batch * S / step_s},
                {"balance", balance},
                {"expert_balance", expert_balance},
                {"dropped", dropped},
                {"padded", padded},
                {"tokens_per_expert", per_expert},
                {"time",
                 {{"gate", t.gate},
                  {"dispatch", t.dispatch},
                  {"expert", t.expert},
                  {"combine", t.combine},
                  {"alltoall", t.alltoall},
                  {"sync", model.sync_seconds()}}},
                {"per_rank", per_rank}};
    if (run.model.moe.policy == Policy::FasterMoE) rec["shadowed"] = shadows;
    if (!prediction_error.empty()) rec["prediction_error"] = prediction_error;
    if (!change.is_null()) rec["placement_change"] = change;
    if ((eval_interval > 0 && (it + 1) % eval_interval == 0) || it + 1 == run.iterations) {
      last_val = validate(model, valid_data, run.batch, config.get_int("train.eval_sequences"), world);
      rec["val_loss"] = last_val;
    }
    metrics.write(rec);
    if (log_interval > 0 && ((it + 1) % log_interval == 0 || it + 1 == run.iterations))
      SKEW_INFO("iter " << it + 1 << "/" << run.iterations << " loss " << loss << " ce " << model.last_ce()
                        << (std::isnan(last_val) ? std::string() : " val " + std::to_string(last_val)) << " balance "
                        << balance_mean << " dropped " << dropped << " step " << step_s * 1e3 << " ms");
    if (ckpt && ((ckpt_interval > 0 && (it + 1) % ckpt_interval == 0) || it + 1 == run.iterations)) {
      auto tensors = save_state(model, adam);
      if (policy)
        for (auto& t : policy->save_state()) tensors.push_back(std::move(t));
      ckpt->write_shard(it + 1, tensors, {{"iteration", std::to_string(it + 1)}});
      const Json index = checkpoint_index(world, tensors, policy_name, model);
      world.barrier();  // every shard is on disk: the index, then the marker
      if (rank == 0) ckpt->write_index(it + 1, index), ckpt->commit(it + 1);
    }
  }
  const std::int64_t done = run.iterations - start;
  Json summary = {
      {"app", "moe_train"},
      {"ranks", N},
      {"policy", policy_name},
      {"iterations", run.iterations},
      {"final_loss", last_loss},
      {"final_val_loss", last_val},
      {"unigram_entropy", entropy},
      {"step_s", measured ? total_step_s / static_cast<double>(measured) : NAN},
      {"ideal_step_s", measured ? total_ideal_s / static_cast<double>(measured) : NAN},
      {"tokens_per_s",
       measured ? static_cast<double>(N) * run.batch * S * static_cast<double>(measured) / total_step_s : NAN},
      {"balance", done ? balance_sum / static_cast<double>(done) : NAN},
      {"dropped", dropped_total},
      {"padded", padded_total}};
  if (flexmoe) {
    summary["placement_changes"] = placement_changes;
    const auto& c = dynamic_cast<const placement::FlexMoePolicy&>(*policy).model().constants();
    summary["cost_constants"] = {{"gemm_flops", c.gemm_flops},
                                 {"alltoall_bandwidth", c.inter_bandwidth},
                                 {"allreduce_bandwidth", c.allreduce_bandwidth},
                                 {"alltoall_latency", c.alltoall_latency}};
  }
  return summary;
}

}  // namespace skew::moe
