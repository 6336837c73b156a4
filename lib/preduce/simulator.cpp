// The discrete-event simulator: N virtual workers in one process on a virtual clock. Each
// worker's step takes sim.compute_ms plus its injected heterogeneity plus sim.overhead_ms;
// reductions cost latency + ring all-reduce bytes / bandwidth plus the slowest member's link
// delay (hetero.link_ms), and a partial-reduce or eager group sim.controller_ms more. Groups come from the same
// GroupFormer as the MPI controller, and the model arithmetic is the same Worker code, so a run is a pure function of
// the configuration (deterministic for a seed).
#include "core/checkpoint_resume.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "lib/preduce/simulation.hpp"

namespace skew::preduce {
namespace sim {

// S = sum_j w_j v_j over the members' models (or gradients / accumulators); a member then takes
// the update rule (models) or S itself (gradients).
void Simulation::weighted_sum(const comm::Group& g, std::vector<float>& (Worker::*part)()) {
  sum_.assign((worker(g.members[0]).*part)().size(), 0.0f);
  for (std::size_t j = 0; j < g.members.size(); ++j) {
    const auto& v = (worker(g.members[j]).*part)();
    const auto wj = static_cast<float>(g.weights[j]);
    for (std::size_t i = 0; i < v.size(); ++i) sum_[i] += wj * v[i];
  }
}

void Simulation::average_models(const comm::Group& g) {
  const std::size_t k = g.members.size();
  if (k <= 1) return;
  weighted_sum(g, &Worker::params);
  for (std::size_t j = 0; j < k; ++j) {
    auto& v = worker(g.members[j]).params();
    comm::apply_member_update(v.data(), sum_.data(), v.size(), g.weights[j], static_cast<int>(k), opt_.member_rule);
  }
}

void Simulation::average_gradients(const comm::Group& g, std::vector<float>& (Worker::*part)()) {
  if (g.members.size() <= 1) return;
  weighted_sum(g, part);
  for (int m : g.members) std::copy(sum_.begin(), sum_.end(), (worker(m).*part)().begin());
}

void Simulation::close_groups(double t) {
  while (auto g = former_.poll(t)) {
    const double done = t + opt_.sim_controller_ms * 1e-3 + comm_cost(g->members.size()) + link_delay(g->members);
    ++groups_;
    members_ += static_cast<std::int64_t>(g->members.size());
    mode_->group_closed(*this, *g, t, done);
  }
  if (auto d = former_.next_deadline(); d && *d > t) queue_.push({*d, seq_++, -1});
}

void Simulation::charge_group_wait(const comm::Group& g, double t) {
  for (int m : g.members)
    wait_[static_cast<std::size_t>(m)] += t - ready_at_[static_cast<std::size_t>(m)] + opt_.sim_controller_ms * 1e-3;
}

void Simulation::release_group(const comm::Group& g, double done, std::int64_t version_step) {
  for (int m : g.members) {
    worker(m).set_version(g.max_version + version_step);
    continue_or_finish(m, done);
  }
}

// Averaged now, on the models as they are (they went on computing since their ready); each
// member's communication thread is busy until `done`.
void Simulation::reduce_in_background(const comm::Group& g, double done,
                                      const std::function<std::int64_t(std::int64_t, std::int64_t)>& refresh_budget) {
  for (int m : g.members) {
    const auto i = static_cast<std::size_t>(m);
    Worker& member = workers_[i];
    auto& left = refreshes_left_[i];
    left = refreshing_[i] ? left - 1 : refresh_budget(g.max_version, ready_version_[i]);
    member.set_version(std::max(member.version(), g.max_version + member.version() - ready_version_[i]));
    queue_.push({done, seq_++, m, Event::Kind::ThreadFree});
  }
}

// One AD-PSGD averaging of active worker w with a random passive worker, atomic at t; both
// links are busy for one pairwise reduction. A partner still busy answering another active
// worker defers it (w's thread waits for it, with the same partner).
void Simulation::gossip(int w, double t) {
  const auto i = static_cast<std::size_t>(w);
  if (gossip_partner_[i] < 0)
    gossip_partner_[i] = 2 * static_cast<int>(gossip_rng_[i].below(static_cast<std::uint64_t>(n_ / 2))) + 1;
  const int partner = gossip_partner_[i];
  const double partner_free = gossip_free_at_[static_cast<std::size_t>(partner)];
  if (partner_free > t) {
    gossip_pending_[i] = 1;
    gossip_free_at_[i] = partner_free;
    queue_.push({partner_free, seq_++, w, Event::Kind::ThreadFree});
    return;
  }
  Worker& me = workers_[i];
  Worker& other = workers_[static_cast<std::size_t>(partner)];
  for (std::size_t j = 0; j < me.params().size(); ++j)
    me.params()[j] = other.params()[j] = 0.5f * (me.params()[j] + other.params()[j]);
  const std::int64_t v = std::max(me.version(), other.version());
  me.set_version(v);
  other.set_version(v);
  gossip_pending_[i] = 0;
  gossip_partner_[i] = -1;
  gossip_free_at_[i] = gossip_free_at_[static_cast<std::size_t>(partner)] =
      t + comm_cost(2) + link_delay(std::vector<int>{w, partner});
  ++groups_;
  members_ += 2;
}

void Simulation::gossip_when_free(int w, double t) {
  const auto i = static_cast<std::size_t>(w);
  if (n_ < 2 || gossip_pending_[i]) return;
  if (gossip_free_at_[i] <= t) {
    gossip(w, t);
  } else {
    gossip_pending_[i] = 1;
    queue_.push({gossip_free_at_[i], seq_++, w, Event::Kind::ThreadFree});
  }
}

void Simulation::reduce_when_free(int w, double t) {
  if (reducing_[static_cast<std::size_t>(w)])
    gossip_pending_[static_cast<std::size_t>(w)] = 1;
  else
    overlap_ready(w, t);
}

void Simulation::reduced(int w, double t) {
  const auto i = static_cast<std::size_t>(w);
  reducing_[i] = 0;
  if (stopping_[i])
    former_.finished(w);
  else if (gossip_pending_[i])
    overlap_ready(w, t);
  else if (refreshes_left_[i] > 0) {
    ++refreshes_[i];
    overlap_ready(w, t, true);
  }
  if (stopping_[i]) close_groups(t);  // the others may now close without it
}

void Simulation::join_group(int w, double t) {
  ready_at_[static_cast<std::size_t>(w)] = t;
  former_.ready(w, worker(w).version(), t);
  close_groups(t);
}

void Simulation::continue_or_finish(int w, double t) {
  Worker& me = worker(w);
  me.finish_step();
  end_[static_cast<std::size_t>(w)] = t;
  if (me.step() > segment_end_) SKEW_THROW("worker " << w << " ran past its segment");
  if (me.step() < segment_end_ && !out_of_time(w))
    schedule(w, t);
  else if (reducing_[static_cast<std::size_t>(w)])
    stopping_[static_cast<std::size_t>(w)] = 1;  // finishes when reduced
  else
    former_.finished(w);  // without groups the former only counts who is still training
}

void Simulation::run_rounds() {
  double t = start_;
  std::vector<int> everyone(static_cast<std::size_t>(n_));
  for (int w = 0; w < n_; ++w) everyone[static_cast<std::size_t>(w)] = w;
  const double links = link_delay(everyone);
  for (std::int64_t step = workers_[0].step(); step < segment_end_; ++step) {
    double slowest = 0.0;
    std::vector<double> took(static_cast<std::size_t>(n_));
    for (int w = 0; w < n_; ++w)
      slowest = std::max(slowest, took[static_cast<std::size_t>(w)] = step_time(workers_[static_cast<std::size_t>(w)]));
    const double done = t + slowest + comm_cost(static_cast<std::size_t>(n_)) + links;
    evaluate_until(done);
    sum_.assign(workers_[0].params().size(), 0.0f);
    for (auto& w : workers_) {
      mode_->local_step(w);
      for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += w.grad()[i] / static_cast<float>(n_);
    }
    for (int w = 0; w < n_; ++w) {
      Worker& me = workers_[static_cast<std::size_t>(w)];
      std::copy(sum_.begin(), sum_.end(), me.grad().begin());
      me.apply_gradient();
      me.finish_step();
      wait_[static_cast<std::size_t>(w)] += slowest - took[static_cast<std::size_t>(w)];
      end_[static_cast<std::size_t>(w)] = done;
    }
    t = done;
  }
}

void Simulation::run_events() {
  // Transient per segment, as the MPI run's controller and communication threads are.
  for (auto* flags : {&gossip_pending_, &reducing_, &stopping_, &refreshing_})
    std::fill(flags->begin(), flags->end(), 0);
  std::fill(gossip_partner_.begin(), gossip_partner_.end(), -1);
  std::fill(refreshes_left_.begin(), refreshes_left_.end(), 0);
  for (int w = 0; w < n_; ++w) {
    if (workers_[static_cast<std::size_t>(w)].step() < segment_end_ && !out_of_time(w))
      schedule(w, start_);
    else
      former_.finished(w);
  }
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    evaluate_until(e.time);
    if (e.worker < 0)
      close_groups(e.time);
    else if (e.kind == Event::Kind::ThreadFree)
      mode_->comm_thread_free(*this, e.worker, e.time);
    else
      mode_->step_done(*this, e.worker, e.time);
  }
  SKEW_CHECK(former_.all_finished(), "simulation ended with " << former_.active() << " workers still active");
}

RunResult Simulation::run() {
  const RunCheckpoints ckpt(opt_, 0, 1, n_);
  const std::int64_t resumed = ckpt.restore(
      this_process_only, [&](const TensorFile& shard, const std::string& origin) { load_state(shard, origin); });
  std::int64_t first = opt_.steps;
  for (auto& w : workers_) first = std::min(first, w.step());
  for (std::int64_t end : ckpt.segment_ends(first)) {
    segment_end_ = end;
    const comm::FormerState history = former_.state();
    former_ = comm::GroupFormer(mode_->group_options(n_));
    former_.restore(history);
    mode_->simulate_segment(*this);
    start_ = *std::max_element(end_.begin(), end_.end());
    if (!ckpt.enabled() || (end == opt_.steps && end == resumed)) continue;
    std::int64_t step = 0;
    for (auto& w : workers_) step = std::max(step, w.step());
    ckpt.save(nullptr, step, save_state());
  }
  return result();
}

// The run's curve, average model and summary, once every segment has run.
RunResult Simulation::result() {
  const double wall = *std::max_element(end_.begin(), end_.end());
  std::vector<double> finals;
  for (int id : eval_ids_) finals.push_back(accuracy(workers_[static_cast<std::size_t>(id)].params()));
  RunResult r;
  r.curve = mean_curve(opt_.eval_interval_s, series_, finals, eval_weights_);
  r.average_model.assign(workers_[0].params().size(), 0.0f);
  for (auto& w : workers_)
    for (std::size_t i = 0; i < r.average_model.size(); ++i)
      r.average_model[i] += w.params()[i] / static_cast<float>(n_);
  double mean_final = 0.0, idle = 0.0;
  for (std::size_t i = 0; i < finals.size(); ++i)
    mean_final += eval_weights_.empty() ? finals[i] / static_cast<double>(finals.size()) : finals[i] * eval_weights_[i];
  for (int w = 0; w < n_; ++w)
    idle += wait_[static_cast<std::size_t>(w)] / std::max(end_[static_cast<std::size_t>(w)], 1e-12) / n_;
  r.summary = run_summary(opt_, true, n_, wall, task_->metric_name(), r.curve, mean_final, accuracy(r.average_model));
  r.summary["mean_idle_fraction"] = idle;
  r.summary["groups"] = groups_;
  r.summary["mean_group_size"] = groups_ ? static_cast<double>(members_) / static_cast<double>(groups_) : 0.0;
  if (mode_->counts_refreshes()) r.summary["refreshes_per_worker"] = refreshes_;
  return r;
}

}  // namespace sim

RunResult simulate(const TrainOptions& opt) {
  std::optional<CsvWriter> curve_out = open_curve(opt);
  double warmup_s = 0.0;
  const bool auto_group = make_sync_mode(opt)->auto_group_size();
  std::unique_ptr<Task> task = make_task(opt, opt.sim_workers);
  const TrainOptions resolved = auto_group ? resolve_simulated_group_size(opt, task->init().size(), warmup_s) : opt;
  RunResult r = sim::Simulation(resolved, std::move(task)).run();
  write_curve(curve_out, r.curve);
  if (auto_group) {
    r.summary["group_size"] = resolved.group_size;
    r.summary["auto_warmup_s"] = warmup_s;  // not in the curve's clock: add it to time_to_target_s
  }
  return r;
}

}  // namespace skew::preduce
