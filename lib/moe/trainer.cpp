#include "lib/moe/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "lib/moe/resume.hpp"
#include "lib/moe/routing_trace.hpp"
#include "lib/moe/session.hpp"

namespace skew::moe {

namespace {

double max_over_mean(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 1.0;
}

void checkpoint(Session& s, std::int64_t step) {
  auto tensors = save_state(s.model->network(), *s.adam);
  for (auto& t : s.policy->save_state()) tensors.push_back(std::move(t));
  s.ckpt->write_shard(step, tensors, {{"iteration", std::to_string(step)}});
  const Json index = checkpoint_index(s.world, tensors, s.policy_name, s.model_keys, s.model->network());
  s.world.barrier();  // every shard is on disk: the index, then the marker
  if (s.world.rank() == 0) s.ckpt->write_index(step, index), s.ckpt->commit(step);
  // No rank goes on before the marker is down: a resume in the same job (the tests run several)
  // must find the same newest step on every rank.
  s.world.barrier();
}

// Sums over the iterations run, for the summary.
struct Totals {
  double step_s = 0, ideal_s = 0, balance = 0, last_val = NAN, last_loss = NAN;
  Json last_step_metrics = Json::object(), last_val_metrics = Json::object();  // the family's own, "val_" prefixed
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

// A diverged run (NaN or inf loss or gradient norm) ends here, on every rank together (the
// value is agreed by an allreduce, so no rank goes on to a collective alone), before its
// iteration's record or checkpoint is written: training on would only produce `loss nan`.
void stop_unless_finite(comm::ProcessGroup& world, std::int64_t it, const char* what, double value) {
  std::vector<double> finite = {std::isfinite(value) ? 1.0 : 0.0};
  world.allreduce(comm::view(finite), comm::ReduceOp::Min);
  if (finite[0] == 0)
    SKEW_THROW("training diverged at iteration " << it << ": the " << what << " is " << value
                                                 << (std::isfinite(value) ? " here but not on another rank" : "")
                                                 << "; lower train.lr or model.init_std");
}

// One training iteration: the policy's re-plan, forward and backward, gradient sync and AdamW
// make the step time (FlexMoE's planning and moving are part of its cost); then the policy
// observes the step, and the record gets the load and what the policy adds.
Json step(Session& s, RoutingTrace& trace, std::int64_t it, std::int64_t start, Totals& totals, StepLoad& load) {
  const std::vector<const std::int32_t*> forced = trace.read(it);
  MoeNetwork<float>& net = s.model->network();
  for (auto& layer : net.moe()) layer->times() = LayerTimes{};
  Timer step_timer;
  s.policy->replan(it, net.moe(), *s.store);
  net.zero_grads();
  const double loss = s.model->train_step(it, forced);
  stop_unless_finite(s.world, it, "loss", loss);
  net.sync_grads();
  const double grad_norm = s.adam->step(it);
  stop_unless_finite(s.world, it, "gradient norm", grad_norm);
  const double step_s = step_timer.seconds();
  s.policy->observe(it, net.moe(), step_s);
  trace.write(net.moe());
  Json rec = {{"iter", it},
              {"loss", loss},
              {"ce", s.model->last_objective()},
              {"lr", learning_rate(s.loop.adam, it)},
              {"grad_norm", grad_norm},
              {"step_s", step_s}};
  rec.update(s.model->step_metrics());
  load = record_load(s, step_s, rec);
  s.policy->record(net.moe(), rec);
  if (it > start)
    totals.step_s += step_s, totals.ideal_s += load.ideal_s, ++totals.measured;  // first step warms caches
  totals.balance += load.balance, totals.dropped += load.dropped, totals.padded += load.padded;
  totals.last_loss = loss;
  totals.last_step_metrics = s.model->step_metrics();
  return rec;
}

// The progress line. Its "ce" is the objective of the model's last forward pass: the
// validation one after an evaluation.
// The family's own measures follow: the step's, then the last validation's.
void log_progress(const Session& s, std::int64_t it, const Json& rec, const StepLoad& load, const Totals& totals) {
  std::ostringstream family;  // numbers to 6 digits, like the rest of the line
  for (const Json* metrics : {&totals.last_step_metrics, &totals.last_val_metrics})
    for (const auto& [key, value] : metrics->items()) {
      family << " " << key << " ";
      value.is_number() ? family << value.get<double>() : family << value.dump();
    }
  SKEW_INFO("iter " << it + 1 << "/" << s.loop.iterations << " loss " << rec["loss"].get<double>() << " ce "
                    << s.model->last_objective()
                    << (std::isnan(totals.last_val) ? std::string() : " val " + std::to_string(totals.last_val))
                    << family.str() << " balance " << load.balance << " dropped " << load.dropped << " step "
                    << rec["step_s"].get<double>() * 1e3 << " ms");
}

Json summarise(const Session& s, const Totals& t, std::int64_t start) {
  const std::int64_t done = s.loop.iterations - start;
  const double tokens = static_cast<double>(s.world.size()) * static_cast<double>(s.model->tokens_per_step());
  Json summary = {{"app", "moe_train"},        {"ranks", s.world.size()},
                  {"policy", s.policy_name},   {"iterations", s.loop.iterations},
                  {"final_loss", t.last_loss}, {"final_val_loss", t.last_val}};
  for (const auto& [key, value] : t.last_step_metrics.items()) summary["final_" + key] = value;
  for (const auto& [key, value] : t.last_val_metrics.items()) summary["final_" + key] = value;
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

Json train(const MoeTrainOptions& options, comm::ProcessGroup& world) {
  Session s(options, world);
  const std::int64_t start = restore(s);
  RoutingTrace trace(s, start);
  const std::string metrics_path = world.rank() == 0 ? options.output.metrics : "";
  if (start > 0) keep_jsonl_records_before(metrics_path, "iter", start);
  JsonlWriter metrics(metrics_path, start > 0 ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
  const LoopOptions& o = s.loop;
  Totals totals;
  Progress progress("moe_train", start, o.iterations, "iterations", world.rank() == 0);
  for (std::int64_t it = start; it < o.iterations; ++it) {
    StepLoad load;
    Json rec = step(s, trace, it, start, totals, load);
    if (o.due(o.eval_interval, it)) {
      rec["val_loss"] = totals.last_val = s.model->validation_loss();
      const Json family = s.model->validation_metrics();  // a named value: it outlives the loop
      totals.last_val_metrics = Json::object();
      for (const auto& [key, value] : family.items()) rec["val_" + key] = totals.last_val_metrics["val_" + key] = value;
    }
    metrics.write(rec);
    if (o.log_interval > 0 && o.due(o.log_interval, it)) log_progress(s, it, rec, load, totals);
    if (s.ckpt && o.due(o.checkpoint_interval, it)) checkpoint(s, it + 1);
    progress.update(it + 1);
  }
  trace.close();
  metrics.close();
  return summarise(s, totals, start);
}

}  // namespace skew::moe
