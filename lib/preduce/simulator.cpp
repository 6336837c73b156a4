// The discrete-event simulator: N virtual workers in one process on a virtual clock. Each
// worker's step takes sim.compute_ms plus its injected heterogeneity plus sim.overhead_ms;
// reductions cost latency + ring all-reduce bytes / bandwidth, and a partial-reduce or eager
// group sim.controller_ms more. Groups come from the same GroupFormer as the
// MPI controller, and the model arithmetic is the same Worker code, so a run is a pure
// function of the configuration (deterministic for a seed).
#include <algorithm>
#include <queue>

#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/core/rng.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/preduce_groups.hpp"

namespace skew::preduce {
namespace {

struct Event {
  double time;
  std::uint64_t seq;
  int worker;  // -1: a group deadline
  // Step: the worker's step is done. Gossip (adpsgd): its communication thread starts a pending
  // averaging. Reduced (preduce.overlap): its group averaging is complete.
  enum class Kind { Step, Gossip, Reduced } kind = Kind::Step;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

class Simulation {
 public:
  explicit Simulation(const TrainOptions& opt)
      : opt_(opt),
        task_(make_task(opt, opt.sim_workers)),
        n_(opt.sim_workers),
        former_(group_options(opt, opt.sim_workers)) {
    for (int w = 0; w < n_; ++w) workers_.emplace_back(opt, *task_, w);
    const int e = std::min(opt.sim_eval_workers, n_);
    for (int i = 0; i < e; ++i) eval_ids_.push_back(i * n_ / e);
    series_.resize(eval_ids_.size());
    bytes_ = static_cast<double>(workers_[0].params().size()) * sizeof(float);
    ready_at_.assign(static_cast<std::size_t>(n_), 0.0);
    wait_.assign(static_cast<std::size_t>(n_), 0.0);
    end_.assign(static_cast<std::size_t>(n_), 0.0);
    gossip_free_at_.assign(static_cast<std::size_t>(n_), 0.0);
    gossip_pending_.assign(static_cast<std::size_t>(n_), 0);
    for (int w = 0; w < n_; ++w) gossip_rng_.emplace_back(opt.seed, 0xad95d000ull + static_cast<std::uint64_t>(w));
    reducing_.assign(static_cast<std::size_t>(n_), 0);
    stopping_.assign(static_cast<std::size_t>(n_), 0);
    ready_version_.assign(static_cast<std::size_t>(n_), 0);
    refreshing_.assign(static_cast<std::size_t>(n_), 0);
    refreshes_left_.assign(static_cast<std::size_t>(n_), 0);
    refreshes_.assign(static_cast<std::size_t>(n_), 0);
  }

  RunResult run();

 private:
  double comm_cost(std::size_t k) const {
    if (k <= 1) return 0.0;
    const double kk = static_cast<double>(k);
    return opt_.sim_latency_ms * 1e-3 + 2.0 * (kk - 1.0) / kk * bytes_ / (opt_.sim_bandwidth_gbs * 1e9);
  }
  double step_time(Worker& w) const {
    const double compute = opt_.sim_compute_ms * 1e-3;
    return compute + w.hetero().injected_s(w.step(), compute) + opt_.sim_overhead_ms * 1e-3;
  }
  double accuracy(const std::vector<float>& params) { return task_->metric(params); }
  // Records the accuracy of the evaluated workers for every grid point up to `t`.
  void evaluate_until(double t) {
    if (next_eval_ > t) return;
    std::vector<double> acc;
    for (int id : eval_ids_) acc.push_back(accuracy(workers_[static_cast<std::size_t>(id)].params()));
    for (; next_eval_ <= t; next_eval_ += opt_.eval_interval_s)
      for (std::size_t i = 0; i < acc.size(); ++i) series_[i].push_back(acc[i]);
  }
  void schedule(int w, double t) { queue_.push({t + step_time(workers_[static_cast<std::size_t>(w)]), seq_++, w}); }
  // After a worker's synchronisation ends at t: next step, or finished.
  void continue_or_finish(int w, double t) {
    Worker& me = workers_[static_cast<std::size_t>(w)];
    me.finish_step();
    end_[static_cast<std::size_t>(w)] = t;
    if (me.step() < opt_.steps && !(time_limited(opt_) && t >= opt_.max_seconds))
      schedule(w, t);
    else if (reducing_[static_cast<std::size_t>(w)])
      stopping_[static_cast<std::size_t>(w)] = 1;  // finishes when reduced
    else if (opt_.mode == SyncMode::Preduce || opt_.mode == SyncMode::Eager)
      former_.finished(w);
  }
  // preduce.overlap: the worker's communication thread reports it ready (it is free).
  void overlap_ready(int w, double t, bool refresh = false) {
    const auto i = static_cast<std::size_t>(w);
    reducing_[i] = 1;
    refreshing_[i] = refresh;
    gossip_pending_[i] = 0;
    ready_at_[i] = t;
    ready_version_[i] = workers_[i].version();
    former_.ready(w, ready_version_[i], t);
    close_groups(t);
  }
  void on_reduced(int w, double t) {
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
  void close_groups(double t);
  void on_step_done(int w, double t);
  void run_allreduce();
  void average_in_group(const comm::Group& g, bool equal_weights_gradient);
  void gossip(int w, double t);

  const TrainOptions& opt_;
  std::unique_ptr<Task> task_;
  int n_;
  comm::GroupFormer former_;
  std::vector<Worker> workers_;
  std::vector<int> eval_ids_;
  std::vector<std::vector<double>> series_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  double bytes_ = 0.0, next_eval_ = 0.0;
  std::vector<double> ready_at_, wait_, end_;
  // AD-PSGD: when each active worker's communication thread is free again, whether a request
  // waits for it, and its partner choice.
  std::vector<double> gossip_free_at_;
  std::vector<char> gossip_pending_;
  std::vector<Rng> gossip_rng_;
  // preduce.overlap: a worker's reduction is in flight (in the queue or averaging); it ends its
  // training once that completes; its version when it reported ready; whether that ready is a
  // refresh and how many refreshes it has left (refresh_budget).
  // gossip_pending_ doubles as its coalesced request.
  std::vector<char> reducing_, stopping_, refreshing_;
  std::vector<std::int64_t> refreshes_left_;
  std::vector<std::int64_t> refreshes_;  // per worker: groups joined without a new local step
  std::vector<std::int64_t> ready_version_;
  std::int64_t groups_ = 0, members_ = 0;
  std::vector<float> sum_;
};

// S = sum_j w_j v_j over the members' models (or gradients / accumulators), then each member
// takes the update rule (models) or S itself (gradients).
void Simulation::average_in_group(const comm::Group& g, bool gradients) {
  const std::size_t k = g.members.size();
  if (k <= 1) return;
  const bool eager = opt_.mode == SyncMode::Eager;
  auto vec = [&](int m) -> std::vector<float>& {
    Worker& w = workers_[static_cast<std::size_t>(m)];
    return !gradients ? w.params() : eager ? w.accum() : w.grad();
  };
  sum_.assign(vec(g.members[0]).size(), 0.0f);
  for (std::size_t j = 0; j < k; ++j) {
    const auto& v = vec(g.members[j]);
    const auto wj = static_cast<float>(g.weights[j]);
    for (std::size_t i = 0; i < v.size(); ++i) sum_[i] += wj * v[i];
  }
  for (std::size_t j = 0; j < k; ++j) {
    auto& v = vec(g.members[j]);
    if (gradients)
      std::copy(sum_.begin(), sum_.end(), v.begin());
    else
      comm::apply_member_update(v.data(), sum_.data(), v.size(), g.weights[j], static_cast<int>(k), opt_.member_rule);
  }
}

void Simulation::close_groups(double t) {
  while (auto g = former_.poll(t)) {
    const double done = t + opt_.sim_controller_ms * 1e-3 + comm_cost(g->members.size());
    ++groups_;
    members_ += static_cast<std::int64_t>(g->members.size());
    if (!overlapped(opt_))  // with overlap the computing thread does not wait
      for (int m : g->members)
        wait_[static_cast<std::size_t>(m)] +=
            t - ready_at_[static_cast<std::size_t>(m)] + opt_.sim_controller_ms * 1e-3;
    if (opt_.mode == SyncMode::Eager) {
      average_in_group(*g, true);
      for (int m : g->members) workers_[static_cast<std::size_t>(m)].apply_reduced(true);
      if (g->full_sync) average_in_group(*g, false);
    } else if (opt_.reduce_gradient) {
      average_in_group(*g, true);
      for (int m : g->members) workers_[static_cast<std::size_t>(m)].apply_reduced(false);
    } else {
      average_in_group(*g, false);
    }
    const bool models = opt_.mode == SyncMode::Preduce && !opt_.reduce_gradient;
    if (overlapped(opt_)) {
      // Averaged now, on the models as they are (they went on computing since their ready);
      // each member's communication thread is busy until `done`.
      for (int m : g->members) {
        Worker& member = workers_[static_cast<std::size_t>(m)];
        const std::int64_t ready_version = ready_version_[static_cast<std::size_t>(m)];
        auto& left = refreshes_left_[static_cast<std::size_t>(m)];
        left =
            refreshing_[static_cast<std::size_t>(m)] ? left - 1 : refresh_budget(opt_, g->max_version, ready_version);
        member.set_version(std::max(member.version(), g->max_version + member.version() - ready_version));
        queue_.push({done, seq_++, m, Event::Kind::Reduced});
      }
      continue;
    }
    for (int m : g->members) {
      workers_[static_cast<std::size_t>(m)].set_version(g->max_version + (models ? 0 : 1));
      continue_or_finish(m, done);
    }
  }
  if (auto d = former_.next_deadline(); d && *d > t) queue_.push({*d, seq_++, -1});
}

// One AD-PSGD averaging of active worker w with a random passive worker, atomic at t; w's
// communication thread is busy for one pairwise reduction.
void Simulation::gossip(int w, double t) {
  const int passives = n_ / 2;
  const int partner =
      2 * static_cast<int>(gossip_rng_[static_cast<std::size_t>(w)].below(static_cast<std::uint64_t>(passives))) + 1;
  Worker& me = workers_[static_cast<std::size_t>(w)];
  Worker& other = workers_[static_cast<std::size_t>(partner)];
  for (std::size_t i = 0; i < me.params().size(); ++i)
    me.params()[i] = other.params()[i] = 0.5f * (me.params()[i] + other.params()[i]);
  const std::int64_t v = std::max(me.version(), other.version());
  me.set_version(v);
  other.set_version(v);
  gossip_pending_[static_cast<std::size_t>(w)] = 0;
  gossip_free_at_[static_cast<std::size_t>(w)] = t + comm_cost(2);
  ++groups_;
  members_ += 2;
}

void Simulation::on_step_done(int w, double t) {
  Worker& me = workers_[static_cast<std::size_t>(w)];
  me.local_step();
  switch (opt_.mode) {
    case SyncMode::Local: continue_or_finish(w, t); break;
    case SyncMode::Adpsgd:
      // Even workers are active, odd passive (as in the MPI run). The computing thread never
      // waits; an active worker's communication thread averages now, or once it is free
      // (requests made while it is busy are coalesced into one).
      if (w % 2 == 0 && n_ > 1 && !gossip_pending_[static_cast<std::size_t>(w)]) {
        const double free_at = gossip_free_at_[static_cast<std::size_t>(w)];
        if (free_at <= t) {
          gossip(w, t);
        } else {
          gossip_pending_[static_cast<std::size_t>(w)] = 1;
          queue_.push({free_at, seq_++, w, Event::Kind::Gossip});
        }
      }
      continue_or_finish(w, t);
      break;
    case SyncMode::Preduce:
      if (overlapped(opt_)) {
        // The request first: a worker whose last step this was then finishes once it is reduced.
        if (reducing_[static_cast<std::size_t>(w)])
          gossip_pending_[static_cast<std::size_t>(w)] = 1;
        else
          overlap_ready(w, t);
        continue_or_finish(w, t);
        break;
      }
      [[fallthrough]];
    case SyncMode::Eager:
      ready_at_[static_cast<std::size_t>(w)] = t;
      former_.ready(w, me.version(), t);
      close_groups(t);
      break;
    case SyncMode::Allreduce: SKEW_THROW("all-reduce is simulated in rounds");
  }
}

void Simulation::run_allreduce() {
  double t = 0.0;
  for (std::int64_t step = 0; step < opt_.steps; ++step) {
    double slowest = 0.0;
    std::vector<double> took(static_cast<std::size_t>(n_));
    for (int w = 0; w < n_; ++w)
      slowest = std::max(slowest, took[static_cast<std::size_t>(w)] = step_time(workers_[static_cast<std::size_t>(w)]));
    const double done = t + slowest + comm_cost(static_cast<std::size_t>(n_));
    evaluate_until(done);
    sum_.assign(workers_[0].params().size(), 0.0f);
    for (auto& w : workers_) {
      w.local_step();
      for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += w.grad()[i] / static_cast<float>(n_);
    }
    for (int w = 0; w < n_; ++w) {
      Worker& me = workers_[static_cast<std::size_t>(w)];
      std::copy(sum_.begin(), sum_.end(), me.grad().begin());
      me.apply_reduced(false);
      me.finish_step();
      wait_[static_cast<std::size_t>(w)] += slowest - took[static_cast<std::size_t>(w)];
      end_[static_cast<std::size_t>(w)] = done;
    }
    t = done;
  }
}

RunResult Simulation::run() {
  if (opt_.mode == SyncMode::Allreduce) {
    run_allreduce();
  } else {
    for (int w = 0; w < n_; ++w) schedule(w, 0.0);
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      evaluate_until(e.time);
      if (e.worker < 0)
        close_groups(e.time);
      else if (e.kind == Event::Kind::Gossip)
        gossip(e.worker, e.time);
      else if (e.kind == Event::Kind::Reduced)
        on_reduced(e.worker, e.time);
      else
        on_step_done(e.worker, e.time);
    }
    SKEW_CHECK(opt_.mode != SyncMode::Preduce && opt_.mode != SyncMode::Eager ? true : former_.all_finished(),
               "simulation ended with " << former_.active() << " workers still active");
  }
  const double wall = *std::max_element(end_.begin(), end_.end());
  std::vector<double> finals;
  for (int id : eval_ids_) finals.push_back(accuracy(workers_[static_cast<std::size_t>(id)].params()));
  RunResult r;
  r.curve = mean_curve(opt_.eval_interval_s, series_, finals);
  r.average_model.assign(workers_[0].params().size(), 0.0f);
  for (auto& w : workers_)
    for (std::size_t i = 0; i < r.average_model.size(); ++i)
      r.average_model[i] += w.params()[i] / static_cast<float>(n_);
  double mean_final = 0.0, idle = 0.0;
  for (double a : finals) mean_final += a / static_cast<double>(finals.size());
  for (int w = 0; w < n_; ++w)
    idle += wait_[static_cast<std::size_t>(w)] / std::max(end_[static_cast<std::size_t>(w)], 1e-12) / n_;
  r.summary = run_summary(opt_, true, n_, wall, task_->metric_name(), r.curve, mean_final, accuracy(r.average_model));
  r.summary["mean_idle_fraction"] = idle;
  r.summary["groups"] = groups_;
  r.summary["mean_group_size"] = groups_ ? static_cast<double>(members_) / static_cast<double>(groups_) : 0.0;
  if (overlapped(opt_)) r.summary["refreshes_per_worker"] = refreshes_;
  return r;
}

}  // namespace

RunResult simulate(const TrainOptions& opt) {
  std::optional<CsvWriter> curve_out = open_curve(opt);
  RunResult r = Simulation(opt).run();
  write_curve(curve_out, r.curve);
  return r;
}

}  // namespace skew::preduce
