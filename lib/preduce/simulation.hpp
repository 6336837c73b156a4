// The discrete-event simulator's state, shared by its event loop (simulator.cpp) and its
// checkpoint (sim_checkpoint.cpp). Internal to lib/preduce: the public entry is simulate().
#pragma once
#include <algorithm>
#include <queue>

#include "core/rng.hpp"
#include "lib/preduce/auto_group.hpp"
#include "lib/preduce/checkpoint.hpp"
#include "lib/preduce/trainer.hpp"
#include "mpi/preduce_groups.hpp"

namespace skew::preduce::sim {
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
    for (int w = 0; w < n_; ++w) workers_.emplace_back(opt, *task_, w, n_);
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
  bool out_of_time(int w) const { return time_limited(opt_) && end_[static_cast<std::size_t>(w)] >= opt_.max_seconds; }
  // One segment: every worker runs to step segment_end_ (or out of time) and every group and
  // averaging completes; the next segment starts when the last worker ended (a barrier).
  void run_segment();
  TensorList save_state();
  void load_state(const TensorFile& file, const std::string& origin);
  double comm_cost(std::size_t k) const {
    if (k <= 1) return 0.0;
    const double kk = static_cast<double>(k);
    return opt_.sim_latency_ms * 1e-3 + 2.0 * (kk - 1.0) / kk * bytes_ / (opt_.sim_bandwidth_gbs * 1e9);
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
  // After a worker's synchronisation ends at t: next step, or finished.
  void continue_or_finish(int w, double t) {
    Worker& me = workers_[static_cast<std::size_t>(w)];
    me.finish_step();
    end_[static_cast<std::size_t>(w)] = t;
    if (me.step() > segment_end_) SKEW_THROW("worker " << w << " ran past its segment");
    if (me.step() < segment_end_ && !out_of_time(w))
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
  std::int64_t segment_end_ = 0;  // the step the current segment runs to (a checkpoint's or the last)
  double start_ = 0.0;            // when the current segment starts
};

}  // namespace skew::preduce::sim
