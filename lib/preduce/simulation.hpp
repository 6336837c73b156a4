// The discrete-event simulator's state, shared by its event loop (simulator.cpp), its checkpoint
// (sim_checkpoint.cpp) and the sync modes (sync/*.cpp), which drive it through the public
// operations below. Internal to lib/preduce: the public entry is simulate().
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>

#include "core/rng.hpp"
#include "lib/preduce/auto_group.hpp"
#include "lib/preduce/checkpoint.hpp"
#include "lib/preduce/eval_sample.hpp"
#include "lib/preduce/sync/sync_mode.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/preduce_groups.hpp"

namespace skew::preduce::sim {
struct Event {
  double time;
  std::uint64_t seq;
  int worker;  // -1: a group deadline
  // Step: the worker's step is done. ThreadFree: its communication thread is free again (the
  // mode's comm_thread_free: adpsgd starts a pending averaging, overlapped preduce has completed
  // its group averaging).
  enum class Kind { Step, ThreadFree } kind = Kind::Step;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

class Simulation {
 public:
  // `task`: make_task(opt, opt.sim_workers), made by the caller (the automatic group size needs its model).
  Simulation(const TrainOptions& opt, std::unique_ptr<Task> task)
      : opt_(opt),
        mode_(make_sync_mode(opt)),
        task_(std::move(task)),
        n_(opt.sim_workers),
        former_(mode_->group_options(opt.sim_workers)) {
    for (int w = 0; w < n_; ++w) workers_.emplace_back(opt, *task_, w, n_);
    EvalSample sample = eval_sample(opt, n_);
    eval_ids_ = std::move(sample.workers);
    eval_weights_ = std::move(sample.weights);
    series_.resize(eval_ids_.size());
    bytes_ = static_cast<double>(workers_[0].params().size()) * sizeof(float);
    ready_at_.assign(static_cast<std::size_t>(n_), 0.0);
    wait_.assign(static_cast<std::size_t>(n_), 0.0);
    end_.assign(static_cast<std::size_t>(n_), 0.0);
    gossip_free_at_.assign(static_cast<std::size_t>(n_), 0.0);
    gossip_pending_.assign(static_cast<std::size_t>(n_), 0);
    gossip_partner_.assign(static_cast<std::size_t>(n_), -1);
    for (int w = 0; w < n_; ++w) gossip_rng_.emplace_back(opt.seed, 0xad95d000ull + static_cast<std::uint64_t>(w));
    reducing_.assign(static_cast<std::size_t>(n_), 0);
    stopping_.assign(static_cast<std::size_t>(n_), 0);
    ready_version_.assign(static_cast<std::size_t>(n_), 0);
    refreshing_.assign(static_cast<std::size_t>(n_), 0);
    refreshes_left_.assign(static_cast<std::size_t>(n_), 0);
    refreshes_.assign(static_cast<std::size_t>(n_), 0);
  }

  RunResult run();

  // What the sync modes (sync/*.cpp) drive the simulation with.
  Worker& worker(int w) { return workers_[static_cast<std::size_t>(w)]; }
  // A segment as events: steps, group deadlines, gossip and overlapped reductions.
  void run_events();
  // A segment as rounds: every worker steps, then all average (all-reduce).
  void run_rounds();
  // After a worker's synchronisation ends at t: next step, or finished.
  void continue_or_finish(int w, double t);
  // The worker reports ready to the group former at t and waits for its group.
  void join_group(int w, double t);
  // AD-PSGD: worker w's communication thread averages with a random passive (odd) worker now,
  // or once it is free (requests made while it is busy are coalesced into one).
  void gossip_when_free(int w, double t);
  // AD-PSGD: the pending averaging of active worker w with a random passive worker, atomic at t,
  // or once that worker's link is free (it answers one active worker at a time).
  void gossip(int w, double t);
  // preduce.overlap: worker w's communication thread reports ready now, or once its reduction
  // in flight completes (coalesced) ...
  void reduce_when_free(int w, double t);
  // ... which it has at t: it finishes, reports a pending request, or refreshes.
  void reduced(int w, double t);
  // A closed group's members: the computing thread's wait for it (blocking modes).
  void charge_group_wait(const comm::Group& g, double t);
  // Group averaging of the members' models by the member rule, or of a gradient part
  // (&Worker::grad, &Worker::accum), which every member replaces by the weighted sum.
  void average_models(const comm::Group& g);
  void average_gradients(const comm::Group& g, std::vector<float>& (Worker::*part)());
  // Blocking modes: each member takes the group's version plus `version_step` and goes on at `done`.
  void release_group(const comm::Group& g, double done, std::int64_t version_step);
  // preduce.overlap: the members' communication threads are busy until `done`; `refresh_budget`
  // (max_version, ready_version) gives how many refreshes a member has left after its step's group.
  void reduce_in_background(const comm::Group& g, double done,
                            const std::function<std::int64_t(std::int64_t, std::int64_t)>& refresh_budget);

 private:
  bool out_of_time(int w) const {
    return mode_->time_limited() && end_[static_cast<std::size_t>(w)] >= opt_.max_seconds;
  }
  TensorList save_state();
  void load_state(const TensorFile& file, const std::string& origin);
  // A reduction among k members: sim.latency_ms per hop, hops growing with k as a recursive-
  // doubling all-reduce's (log2: ceil(log2 k)) or a ring's (linear: k - 1) do, a pair one hop
  // either way; plus a ring's bytes, 2 (k - 1) / k of the model, over sim.bandwidth_gbs.
  double comm_cost(std::size_t k) const {
    if (k <= 1) return 0.0;
    const double kk = static_cast<double>(k);
    const double hops = opt_.sim_latency_linear ? kk - 1.0 : std::ceil(std::log2(kk));
    return opt_.sim_latency_ms * 1e-3 * hops + 2.0 * (kk - 1.0) / kk * bytes_ / (opt_.sim_bandwidth_gbs * 1e9);
  }
  // A communication waits for its slowest member's link (hetero.link_ms).
  template <typename Members>
  double link_delay(const Members& members) const {
    double slowest = 0.0;
    for (int m : members) slowest = std::max(slowest, workers_[static_cast<std::size_t>(m)].hetero().link_s());
    return slowest;
  }
  double step_time(Worker& w) const { return simulated_step_s(opt_, w.hetero(), w.step()); }
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
  void close_groups(double t);
  // S = sum_j w_j v_j over the members' `part` (models, gradients or accumulators), into sum_.
  void weighted_sum(const comm::Group& g, std::vector<float>& (Worker::*part)());
  RunResult result();

  const TrainOptions& opt_;
  std::unique_ptr<SyncMode> mode_;
  std::unique_ptr<Task> task_;
  int n_;
  comm::GroupFormer former_;
  std::vector<Worker> workers_;
  std::vector<int> eval_ids_;
  std::vector<double> eval_weights_;  // empty: equal
  std::vector<std::vector<double>> series_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  double bytes_ = 0.0, next_eval_ = 0.0;
  std::vector<double> ready_at_, wait_, end_;
  // AD-PSGD: when each worker's link is free again (an active worker's communication thread, a
  // passive worker's answer), whether a request waits for it, its partner choice, and the partner
  // it drew for that request (-1: none yet).
  std::vector<double> gossip_free_at_;
  std::vector<int> gossip_partner_;
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
  std::int64_t segment_end_ = 0;  // the step the current segment runs to (a checkpoint's or the last)
  double start_ = 0.0;            // when the current segment starts
};

}  // namespace skew::preduce::sim
