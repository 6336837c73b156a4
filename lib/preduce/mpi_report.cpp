// The MPI run's report: every worker's totals gathered into the summary on worker 0.
#include <algorithm>

#include "lib/preduce/mpi_run.hpp"

namespace skew::preduce {
namespace {

// Per-worker totals, gathered: compute, injected, wait, comm, end time, steps/s, final accuracy;
// then synchronisations joined, controller latency, the communication thread's wait, refreshes.
enum Total { Compute, Injected, Wait, Comm, End, StepsPerS, Final, Syncs, Controller, SyncWait, Refreshes, Totals };

// The mean accuracy curve: every worker's series padded to the longest with its final accuracy.
Curve mean_worker_curve(const MpiRun& run, double final_accuracy) {
  std::vector<double> series = run.progress.series;
  std::int64_t length = static_cast<std::int64_t>(series.size());
  run.workers->allreduce(comm::view(&length, 1), comm::ReduceOp::Max);
  series.resize(static_cast<std::size_t>(length), final_accuracy);
  run.workers->allreduce(comm::view(series), comm::ReduceOp::Avg);
  return Curve{run.opt.eval_interval_s, series};
}

Json per_worker_record(const SyncMode& mode, int w, const double* v) {
  Json r{{"worker", w},
         {"compute_s", v[Compute]},
         {"injected_s", v[Injected]},
         {"wait_s", v[Wait]},
         {"comm_s", v[Comm]},
         {"end_s", v[End]},
         {"steps_per_s", v[StepsPerS]},
         {"idle_fraction", v[Wait] / v[End]},
         {"final_accuracy", v[Final]}};
  r["syncs"] = v[Syncs];
  if (mode.in_background()) r["sync_wait_s"] = v[SyncWait];
  if (mode.counts_refreshes()) r["refreshes"] = v[Refreshes];
  // Part of wait_s that is controller and message latency rather than queueing for peers.
  if (mode.forms_groups()) r["controller_s"] = v[Controller];
  return r;
}

}  // namespace

std::optional<RunResult> report(MpiRun& run) {
  Worker& me = *run.me;
  const WorkerProgress& p = run.progress;
  const SyncMode& mode = *run.mode;
  // A communication thread's synchronisations are its own; otherwise the computing thread's.
  const bool background = mode.in_background();
  const std::int64_t groups_joined = background ? p.synced.syncs : p.groups_joined;
  const std::int64_t members_seen = background ? p.synced.members : p.members_seen;
  const double final_acc = run.task->metric(me.params());
  const Curve curve = mean_worker_curve(run, final_acc);
  std::vector<double> mine(Totals);
  mine[Compute] = p.sum_compute;
  mine[Injected] = p.sum_injected;
  mine[Wait] = p.sum_wait;
  mine[Comm] = background ? p.synced.comm_s : p.sum_comm;
  mine[End] = p.elapsed_s;
  mine[StepsPerS] = static_cast<double>(me.step()) / p.elapsed_s;
  mine[Final] = final_acc;
  mine[Syncs] = static_cast<double>(groups_joined);
  mine[Controller] = background ? p.synced.controller_s : p.sum_controller;
  mine[SyncWait] = p.synced.wait_s;
  mine[Refreshes] = static_cast<double>(p.synced.refreshes);
  std::vector<double> all(mine.size() * static_cast<std::size_t>(run.n));
  run.workers->allgather(comm::view(mine), comm::view(all));
  std::vector<float> average = me.params();
  run.workers->allreduce(comm::view(average), comm::ReduceOp::Avg);
  const double average_acc = run.task->metric(average);
  std::int64_t created = static_cast<std::int64_t>(run.workers->subgroups_created());
  run.workers->allreduce(comm::view(&created, 1), comm::ReduceOp::Max);
  if (run.id != 0) return std::nullopt;

  RunResult result{Json{}, curve, std::move(average)};
  Json per_worker = Json::array();
  double wall = 0.0, mean_final = 0.0;
  for (int w = 0; w < run.n; ++w) {
    const double* v = all.data() + static_cast<std::size_t>(w) * mine.size();
    wall = std::max(wall, v[End]);
    mean_final += v[Final] / run.n;
    per_worker.push_back(per_worker_record(mode, w, v));
  }
  result.summary = run_summary(run.opt, false, run.n, wall, run.task->metric_name(), curve, mean_final, average_acc);
  result.summary["subgroups_created"] = created;
  if (mode.forms_groups()) {
    result.summary["groups_joined_worker0"] = groups_joined;
    result.summary["mean_group_size_worker0"] = groups_joined ? static_cast<double>(members_seen) / groups_joined : 0.0;
  }
  if (run.auto_group) {
    result.summary["group_size"] = run.opt.group_size;
    result.summary["auto_warmup_s"] = run.warmup_s;  // not in the curve's clock: add it to time_to_target_s
  }
  result.summary["per_worker"] = per_worker;
  return result;
}

}  // namespace skew::preduce
