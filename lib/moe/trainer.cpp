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
#include "lib/moe/state.hpp"

namespace skew::moe {

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
  m.moe = moe_options(c);
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
  MoeOptions moe = run.model.moe;
  moe.d_model = run.model.d_model;  // the experts' width is the model's
  const std::shared_ptr<BalancingPolicy<float>> policy = policy_from_config(config, moe, run.model.moe_layers(), world);
  std::vector<placement::LayerPlacement> placements(
      static_cast<std::size_t>(run.model.moe_layers()),
      placement::LayerPlacement::block(E, N, policy->slots_per_rank(E, N)));
  GptMoe<float> model(run.model, world, placements, policy);
  model.init(run.seed);
  AdamW adam(run.adam, model, world);
  const int L = static_cast<int>(model.moe().size());
  ModelExpertStore store(model);
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
      policy->load_state(shard);
      check_index_after_load(index, ckpt->index_file(start), model);
      SKEW_INFO("resumed from " << ckpt->rank_file(start) << " at iteration " << start);
    }
  }
  const std::string suffix = ".rank" + std::to_string(rank);
  std::ofstream save_trace;
  std::ifstream replay;
  if (!config.get_string("moe.save_trace").empty()) {
    save_trace.open(config.get_string("moe.save_trace") + suffix,
                    std::ios::binary | (start > 0 ? std::ios::app : std::ios::trunc));
    SKEW_CHECK(save_trace, "moe.save_trace: cannot write " << config.get_string("moe.save_trace") << suffix);
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
    // The step time includes re-planning and moving experts: that overhead is part of the cost.
    Timer step_timer;
    policy->replan(it, model.moe(), store);
    model.zero_grads();
    const double loss = model.step(tokens.data(), targets.data(), run.batch, in, true);
    model.sync_grads();
    const double grad_norm = adam.step(it);
    const double step_s = step_timer.seconds();
    last_loss = loss;
    policy->observe(it, model.moe(), step_s);
    LayerTimes t;  // wall seconds by phase, summed over layers
    Json per_expert = Json::array(), balance = Json::array(), expert_balance = Json::array();
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
    policy->record(model.moe(), rec);
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
  policy->summarise(summary);
  return summary;
}

}  // namespace skew::moe
