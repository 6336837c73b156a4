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
#include "lib/moe/models/gpt.hpp"
#include "lib/moe/optimizer.hpp"
#include "lib/moe/state.hpp"

namespace skew::moe {

namespace {

// train.* and output.* as the loop uses them (the model family reads its own keys).
struct LoopOptions {
  AdamWOptions adam;
  std::int64_t iterations = 0, eval_interval = 0, log_interval = 0, checkpoint_interval = 0;
  // Whether iteration `it` ends an `interval` (0 = none), or is the last.
  bool due(std::int64_t interval, std::int64_t it) const {
    return (interval > 0 && (it + 1) % interval == 0) || it + 1 == iterations;
  }
};

LoopOptions loop_options(const Config& c) {
  LoopOptions o;
  o.iterations = c.get_int("train.iterations");
  o.eval_interval = c.get_int("train.eval_interval");
  o.log_interval = c.get_int("train.log_interval");
  o.checkpoint_interval = c.get_int("output.checkpoint_interval");
  o.adam.lr = c.get_float("train.lr");
  o.adam.min_lr_ratio = c.get_float("train.min_lr_ratio");
  o.adam.warmup = c.get_int("train.warmup");
  o.adam.total = o.iterations;
  o.adam.weight_decay = c.get_float("train.weight_decay");
  o.adam.beta1 = c.get_float("train.beta1");
  o.adam.beta2 = c.get_float("train.beta2");
  o.adam.grad_clip = c.get_float("train.grad_clip");
  return o;
}

double max_over_mean(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
}

// Everything one run holds, built from the config: the model family (GPT) with its MoE layers
// consulting the balancing policy, AdamW, and the checkpoint directory.
struct Session {
  Session(const Config& config, comm::ProcessGroup& world);
  comm::ProcessGroup& world;
  LoopOptions loop;
  std::string policy_name;
  std::shared_ptr<BalancingPolicy<float>> policy;
  std::unique_ptr<Model> model;
  std::unique_ptr<AdamW> adam;
  std::unique_ptr<ModelExpertStore> store;  // where the policy moves expert state
  std::unique_ptr<CheckpointDir> ckpt;
};

Session::Session(const Config& config, comm::ProcessGroup& world_group)
    : world(world_group), loop(loop_options(config)), policy_name(config.get_string("moe.policy")) {
  if (config.get_int("train.blas_threads") > 0)
    kernels::moe::set_blas_threads(static_cast<int>(config.get_int("train.blas_threads")));
  const ModelOptions options = GptModel::options(config, moe_options(config));
  const int N = world.size(), E = options.moe.gate.num_experts;
  if (options.precision == Precision::Bf16 && world.rank() == 0)
    SKEW_INFO("train.precision = bf16: matrix products on the CPU use " << kernels::gemm_bf16_host_path());
  SKEW_CHECK(E % N == 0, "moe.num_experts " << E << " is not a multiple of the " << N << " ranks");
  policy = policy_from_config(config, options.moe, options.moe_layers(), world);
  const std::vector<placement::LayerPlacement> placements(
      static_cast<std::size_t>(options.moe_layers()),
      placement::LayerPlacement::block(E, N, policy->slots_per_rank(E, N)));
  model = std::make_unique<GptModel>(config, options, world, placements, policy);
  adam = std::make_unique<AdamW>(loop.adam, model->network(), world);
  store = std::make_unique<ModelExpertStore>(model->network());
  if (!config.get_string("output.checkpoint_dir").empty())
    ckpt = std::make_unique<CheckpointDir>(config.get_string("output.checkpoint_dir"), world.rank(), N,
                                           static_cast<int>(config.get_int("output.keep")));
}

// output.resume: loads the newest complete checkpoint; returns the iteration to start from.
std::int64_t restore(Session& s, const Config& config) {
  if (!s.ckpt || !config.get_bool("output.resume") || s.ckpt->latest_complete() < 0) return 0;
  const int rank = s.world.rank();
  const std::int64_t start = s.ckpt->latest_complete();
  const Json index = s.ckpt->read_index(start);
  const TensorFile shard = s.ckpt->read_shard(start);
  check_index_before_load(index, s.ckpt->index_file(start), shard, CheckpointDir::shard_name(rank), s.policy_name);
  load_state(shard, s.model->network(), *s.adam, rank);
  s.policy->load_state(shard);
  check_index_after_load(index, s.ckpt->index_file(start), s.model->network());
  SKEW_INFO("resumed from " << s.ckpt->rank_file(start) << " at iteration " << start);
  return start;
}

void checkpoint(Session& s, std::int64_t step) {
  auto tensors = save_state(s.model->network(), *s.adam);
  for (auto& t : s.policy->save_state()) tensors.push_back(std::move(t));
  s.ckpt->write_shard(step, tensors, {{"iteration", std::to_string(step)}});
  const Json index = checkpoint_index(s.world, tensors, s.policy_name, s.model->network());
  s.world.barrier();  // every shard is on disk: the index, then the marker
  if (s.world.rank() == 0) s.ckpt->write_index(step, index), s.ckpt->commit(step);
}

// moe.save_trace / moe.replay_trace: every token's expert choices, per iteration and MoE layer,
// in FILE.rank<r>; a resumed run appends to (or replays from) where it stopped.
class RoutingTrace {
 public:
  RoutingTrace(const Config& config, Session& s, std::int64_t start)
      : suffix_(".rank" + std::to_string(s.world.rank())),
        replay_name_(config.get_string("moe.replay_trace")),
        choices_(static_cast<std::size_t>(s.model->tokens_per_step() * s.model->network().options().moe.gate.top_k)),
        forced_(s.model->network().moe().size(), std::vector<std::int32_t>(choices_)) {
    const std::string save = config.get_string("moe.save_trace");
    if (!save.empty()) {
      save_.open(save + suffix_, start > 0 ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
    }
    if (!replay_name_.empty()) {
      replay_.open(replay_name_ + suffix_, std::ios::binary);
      SKEW_CHECK(replay_, "moe.replay_trace: cannot read " << replay_name_ << suffix_);
      replay_.seekg(static_cast<std::streamoff>(start * forced_.size() * choices_ * sizeof(std::int32_t)));
    }
  }
  // Iteration `it`'s replayed choices per layer; none when not replaying.
  std::vector<const std::int32_t*> read(std::int64_t it) {
    std::vector<const std::int32_t*> out;
    if (!replay_.is_open()) return out;
    for (auto& f : forced_) {
      replay_.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(f.size() * sizeof(std::int32_t)));
      SKEW_CHECK(replay_, "moe.replay_trace: " << replay_name_ << suffix_ << " ends before iteration " << it);
      out.push_back(f.data());
    }
    return out;
  }
  void write(const std::vector<std::unique_ptr<MoeLayer<float>>>& layers) {
    if (!save_.is_open()) return;
    for (const auto& layer : layers)
      save_.write(layer->gate_state().expert.data(), choices_ * sizeof(std::int32_t));
  }
  // A failed last write or close is an error naming the file, not a line on stderr.
  void close() {
    if (save_.is_open()) save_.close();
  }

 private:
  std::string suffix_, replay_name_;
  std::size_t choices_;  // per layer and iteration: tokens * top_k
  OutputFile save_;
  std::ifstream replay_;
  std::vector<std::vector<std::int32_t>> forced_;
};

// Sums over the iterations run, for the summary.
struct Totals {
  double step_s = 0, ideal_s = 0, balance = 0, last_val = NAN, last_loss = NAN;
  std::int64_t dropped = 0, padded = 0, measured = 0;
};

// What an iteration's record says of its load, also kept for the progress line and totals.
struct StepLoad {
  double balance = 0;  // max/mean rows computed per rank, averaged over the layers
  double ideal_s = 0;  // the same step with the expert work spread evenly over the ranks
  std::int64_t dropped = 0, padded = 0;
};

// The load and traffic part of an iteration's record (collective): per layer the routing and
// its balance; per rank and layer the rows computed, expert CPU seconds, and bytes sent in the
// all-to-all, in replica or shadow sync and in placement moves.
StepLoad record_load(Session& s, double step_s, Json& rec) {
  StepLoad out;
  auto& layers = s.model->network().moe();
  const int N = s.world.size(), L = static_cast<int>(layers.size());
  LayerTimes t;  // wall seconds by phase, summed over layers
  Json per_expert = Json::array(), balance = Json::array(), expert_balance = Json::array();
  constexpr int kPerLayer = 5;
  const int W = kPerLayer * L + 1;  // then the expert wall seconds of all layers
  std::vector<double> gathered(static_cast<std::size_t>(N) * W);
  std::vector<double> mine;
  for (auto& layer : layers) {
    const LayerTimes& lt = layer->times();
    t.gate += lt.gate, t.dispatch += lt.dispatch, t.expert += lt.expert;
    t.combine += lt.combine, t.alltoall += lt.alltoall;
    mine.insert(mine.end(), {static_cast<double>(layer->computed_rows()), lt.expert_cpu, lt.alltoall_bytes,
                             lt.sync_bytes, lt.move_bytes});
    const auto& counts = layer->gate_state().global_counts;
    per_expert.push_back(counts);
    expert_balance.push_back(max_over_mean(std::vector<double>(counts.begin(), counts.end())));
    out.dropped += layer->dropped(), out.padded += layer->padded();
  }
  mine.push_back(t.expert);
  s.world.allgather(comm::cview(mine), comm::view(gathered));
  const auto at = [&](int r, int l, int field) {
    return gathered[static_cast<std::size_t>(r) * W + static_cast<std::size_t>(l) * kPerLayer + field];
  };
  double expert_max = 0, expert_sum = 0;
  const char* fields[kPerLayer] = {"rows", "expert_cpu_s", "alltoall_bytes", "sync_bytes", "move_bytes"};
  Json per_rank;
  for (const char* f : fields) per_rank[f] = Json::array();
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
  for (int l = 0; l < L; ++l) {
    std::vector<double> rows;
    for (int r = 0; r < N; ++r) rows.push_back(at(r, l, 0));
    balance.push_back(max_over_mean(rows));
    out.balance += max_over_mean(rows) / L;
  }
  out.ideal_s = step_s - expert_max + expert_sum / N;
  rec["ideal_step_s"] = out.ideal_s;
  rec["tokens_per_s"] = static_cast<double>(N) * static_cast<double>(s.model->tokens_per_step()) / step_s;
  rec["balance"] = balance;
  rec["expert_balance"] = expert_balance;
  rec["dropped"] = out.dropped;
  rec["padded"] = out.padded;
  rec["tokens_per_expert"] = per_expert;
  rec["time"] = {{"gate", t.gate},       {"dispatch", t.dispatch}, {"expert", t.expert},
                 {"combine", t.combine}, {"alltoall", t.alltoall}, {"sync", s.model->network().sync_seconds()}};
  rec["per_rank"] = per_rank;
  return out;
}

// One training iteration: the policy's re-plan, forward and backward, gradient sync and AdamW
// make the step time (FlexMoE's planning and moving are part of its cost); then the policy
// observes the step, and the record gets the load and what the policy adds.
Json step(Session& s, RoutingTrace& trace, std::int64_t it, std::int64_t start, Totals& totals, StepLoad& load) {
  const std::vector<const std::int32_t*> forced = trace.read(it);
  GptMoe<float>& net = s.model->network();
  for (auto& layer : net.moe()) layer->times() = LayerTimes{};
  Timer step_timer;
  s.policy->replan(it, net.moe(), *s.store);
  net.zero_grads();
  const double loss = s.model->train_step(it, forced);
  net.sync_grads();
  const double grad_norm = s.adam->step(it);
  const double step_s = step_timer.seconds();
  s.policy->observe(it, net.moe(), step_s);
  trace.write(net.moe());
  Json rec = {{"iter", it},
              {"loss", loss},
              {"ce", s.model->last_objective()},
              {"lr", learning_rate(s.loop.adam, it)},
              {"grad_norm", grad_norm},
              {"step_s", step_s}};
  load = record_load(s, step_s, rec);
  s.policy->record(net.moe(), rec);
  if (it > start)
    totals.step_s += step_s, totals.ideal_s += load.ideal_s, ++totals.measured;  // first step warms caches
  totals.balance += load.balance, totals.dropped += load.dropped, totals.padded += load.padded;
  totals.last_loss = loss;
  return rec;
}

// The progress line. Its "ce" is the objective of the model's last forward pass: the
// validation one after an evaluation.
void log_progress(const Session& s, std::int64_t it, const Json& rec, const StepLoad& load, double last_val) {
  SKEW_INFO("iter " << it + 1 << "/" << s.loop.iterations << " loss " << rec["loss"].get<double>() << " ce "
                    << s.model->last_objective()
                    << (std::isnan(last_val) ? std::string() : " val " + std::to_string(last_val)) << " balance "
                    << load.balance << " dropped " << load.dropped << " step " << rec["step_s"].get<double>() * 1e3
                    << " ms");
}

Json summarise(const Session& s, const Totals& t, std::int64_t start) {
  const std::int64_t done = s.loop.iterations - start;
  const double tokens = static_cast<double>(s.world.size()) * static_cast<double>(s.model->tokens_per_step());
  Json summary = {{"app", "moe_train"},        {"ranks", s.world.size()},
                  {"policy", s.policy_name},   {"iterations", s.loop.iterations},
                  {"final_loss", t.last_loss}, {"final_val_loss", t.last_val}};
  s.model->summarise(summary);
  summary["step_s"] = t.measured ? t.step_s / static_cast<double>(t.measured) : NAN;
  summary["ideal_step_s"] = t.measured ? t.ideal_s / static_cast<double>(t.measured) : NAN;
  summary["tokens_per_s"] = t.measured ? tokens * static_cast<double>(t.measured) / t.step_s : NAN;
  summary["balance"] = done ? t.balance / static_cast<double>(done) : NAN;
  summary["dropped"] = t.dropped;
  summary["padded"] = t.padded;
  s.policy->summarise(summary);
  return summary;
}

}  // namespace

Json train(const Config& config, comm::ProcessGroup& world) {
  Session s(config, world);
  const std::int64_t start = restore(s, config);
  RoutingTrace trace(config, s, start);
  JsonlWriter metrics(world.rank() == 0 ? config.get_string("output.metrics") : "");
  const LoopOptions& o = s.loop;
  Totals totals;
  for (std::int64_t it = start; it < o.iterations; ++it) {
    StepLoad load;
    Json rec = step(s, trace, it, start, totals, load);
    if (o.due(o.eval_interval, it)) rec["val_loss"] = totals.last_val = s.model->validation_loss();
    metrics.write(rec);
    if (o.log_interval > 0 && o.due(o.log_interval, it)) log_progress(s, it, rec, load, totals.last_val);
    if (s.ckpt && o.due(o.checkpoint_interval, it)) checkpoint(s, it + 1);
  }
  trace.close();
  metrics.close();
  return summarise(s, totals, start);
}

}  // namespace skew::moe
