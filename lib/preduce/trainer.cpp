// The MPI driver: one worker per rank, sync modes over skew::comm.
#include "lib/preduce/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "lib/core/error.hpp"
#include "lib/core/log.hpp"
#include "lib/core/rng.hpp"
#include "lib/core/timer.hpp"
#include "lib/preduce/background.hpp"
#include "mpi/preduce_controller.hpp"

namespace skew::preduce {

std::optional<CsvWriter> open_curve(const TrainOptions& opt) {
  if (opt.curve.empty()) return std::nullopt;
  return std::optional<CsvWriter>(std::in_place, opt.curve, std::vector<std::string>{"time_s", "mean_accuracy"});
}

void write_curve(std::optional<CsvWriter>& out, const Curve& curve) {
  if (!out) return;
  for (std::size_t k = 0; k < curve.mean_accuracy.size(); ++k)
    out->row({csv_number(static_cast<double>(k) * curve.interval), csv_number(curve.mean_accuracy[k])});
  out->close();
}

void check_metrics_path(const TrainOptions& opt, int workers) {
  if (workers > 1 && !opt.metrics.empty() && opt.metrics.find("%r") == std::string::npos)
    SKEW_THROW("output.metrics = '" << opt.metrics << "' has no '%r', but " << workers
                                    << " workers would all write that one file; put '%r' (the rank) in the name, "
                                       "e.g. output.metrics=metrics.%r.jsonl");
}

namespace {

std::string metrics_path(std::string path, int rank) {
  const auto at = path.find("%r");
  if (at != std::string::npos) path.replace(at, 2, std::to_string(rank));
  return path;
}

}  // namespace

std::optional<RunResult> train_mpi(const std::shared_ptr<comm::ProcessGroup>& world, const TrainOptions& opt) {
  const bool controlled = opt.mode == SyncMode::Preduce || opt.mode == SyncMode::Eager;
  const bool dedicated = controlled && opt.dedicated_controller;
  check_metrics_path(opt, world->size() - (dedicated ? 1 : 0));
  std::unique_ptr<comm::PartialReduce> pr;
  std::shared_ptr<comm::ProcessGroup> workers = world;
  if (controlled) {
    pr = std::make_unique<comm::PartialReduce>(world, group_options(opt, world->size() - (dedicated ? 1 : 0)),
                                               dedicated);
    if (!pr->is_worker()) {
      pr->serve();
      return std::nullopt;
    }
    workers = pr->workers();
  }
  const int n = workers->size(), id = workers->rank();
  const std::unique_ptr<Task> task = make_task(opt, n);
  Worker me(opt, *task, id);
  std::unique_ptr<BackgroundSync> background;
  if (opt.mode == SyncMode::Adpsgd) background = make_gossip(workers, me, opt.seed);
  if (overlapped(opt)) background = make_overlapped_reduce(*pr, me, opt);
  JsonlWriter metrics(metrics_path(opt.metrics, world->rank()));
  std::optional<CsvWriter> curve_out = id == 0 ? open_curve(opt) : std::nullopt;
  const auto evaluate = [&] { return task->metric(me.params()); };
  // Models are snapshotted on the time grid and evaluated after training, so evaluation never
  // stalls a worker (or, through the reductions, its peers) inside the timed loop.
  std::vector<std::vector<float>> snapshots;
  std::vector<std::size_t> snapshot_of_point;
  std::vector<float> scratch;
  double next_eval = 0.0, sum_compute = 0.0, sum_injected = 0.0, sum_wait = 0.0, sum_comm = 0.0, sum_controller = 0.0;
  std::int64_t groups_joined = 0, members_seen = 0;
  workers->barrier();
  const Timer clock;
  for (std::int64_t step = 0; step < opt.steps; ++step) {
    Timer t;
    double wait = 0.0, comm_time = 0.0, controller = 0.0;
    std::vector<int> members;
    double loss = 0.0;
    if (background) {
      // The gradient at a snapshot; the communication thread may change the model meanwhile,
      // and the gradient is applied to whatever the model is then.
      {
        auto guard = background->lock();
        scratch = me.params();
      }
      loss = me.gradient_at(scratch);
    } else {
      loss = me.local_step();
    }
    const double compute = t.seconds();
    const double injected = me.hetero().injected_s(step, compute);
    std::this_thread::sleep_for(std::chrono::duration<double>(injected));
    if (background) {
      t.reset();
      {
        auto guard = background->lock();
        wait = t.seconds();  // the lock is held only while a synchronisation's result is applied
        me.apply_reduced(false);
      }
      background->request();
    } else {
      switch (opt.mode) {
        case SyncMode::Allreduce:
          t.reset();
          workers->allreduce(comm::view(me.grad()), comm::ReduceOp::Avg);
          comm_time = t.seconds();
          me.apply_reduced(false);
          break;
        case SyncMode::Local:
        case SyncMode::Adpsgd:  // always in the background
          break;
        case SyncMode::Preduce:
        case SyncMode::Eager: {
          t.reset();
          const comm::Group g = pr->ready(me.version());
          wait = t.seconds();
          controller = std::max(0.0, wait - pr->queued_seconds(g));
          t.reset();
          if (opt.mode == SyncMode::Eager) {
            pr->average_gradient(me.accum(), g);
            me.apply_reduced(true);
            if (g.full_sync) pr->average_model(me.params(), g, scratch);
            me.set_version(g.max_version + 1);
          } else if (opt.reduce_gradient) {
            pr->average_gradient(me.grad(), g);
            me.apply_reduced(false);
            me.set_version(g.max_version + 1);
          } else {
            pr->average_model(me.params(), g, scratch);
            me.set_version(g.max_version);
          }
          comm_time = t.seconds();
          members = g.members;
          ++groups_joined;
          members_seen += static_cast<std::int64_t>(g.members.size());
          break;
        }
      }
    }
    me.finish_step();
    std::int64_t version = 0;
    if (background) {
      auto guard = background->lock();
      version = me.version();
    } else {
      version = me.version();
    }
    sum_compute += compute;
    sum_injected += injected;
    sum_wait += wait;
    sum_comm += comm_time;
    sum_controller += controller;
    const double now = clock.seconds();
    if (now >= next_eval) {
      if (background) {
        auto guard = background->lock();
        snapshots.push_back(me.params());
      } else {
        snapshots.push_back(me.params());
      }
      for (; next_eval <= now; next_eval += opt.eval_interval_s) snapshot_of_point.push_back(snapshots.size() - 1);
    }
    if (metrics.enabled())
      metrics.write(Json{{"step", step},
                         {"time_s", now},
                         {"loss", loss},
                         {"version", version},
                         {"members", members},
                         {"compute_s", compute},
                         {"injected_s", injected},
                         {"wait_s", wait},
                         {"controller_s", controller},
                         {"comm_s", comm_time}});
    if (opt.log_interval > 0 && (step + 1) % opt.log_interval == 0)
      SKEW_INFO("step " << step + 1 << "/" << opt.steps << " loss " << loss << " version " << version << " t " << now
                        << "s");
    if (time_limited(opt) && now >= opt.max_seconds) break;
  }
  BackgroundSync::Stats synced;
  if (background) {
    // Its time is off the computing thread's path: comm, controller and the wait for a group are
    // the communication thread's.
    background->stop();
    synced = background->stats();
    groups_joined = synced.syncs;
    members_seen = synced.members;
    sum_comm = synced.comm_s;
    sum_controller = synced.controller_s;
  }
  if (pr) pr->finish();
  const double end_time = clock.seconds();
  const double final_acc = evaluate();
  std::vector<double> snapshot_acc;
  for (const auto& snapshot : snapshots) snapshot_acc.push_back(task->metric(snapshot));
  std::vector<double> series;
  for (std::size_t s : snapshot_of_point) series.push_back(snapshot_acc[s]);

  // Mean accuracy curve: pad every worker's series to the longest with its final accuracy.
  std::int64_t length = static_cast<std::int64_t>(series.size());
  workers->allreduce(comm::view(&length, 1), comm::ReduceOp::Max);
  series.resize(static_cast<std::size_t>(length), final_acc);
  workers->allreduce(comm::view(series), comm::ReduceOp::Avg);
  Curve curve{opt.eval_interval_s, series};
  // Per-worker totals, gathered: compute, injected, wait, comm, end time, steps/s, final accuracy.
  // Then synchronisations joined, controller latency, the communication thread's wait, refreshes.
  std::vector<double> mine{sum_compute,
                           sum_injected,
                           sum_wait,
                           sum_comm,
                           end_time,
                           static_cast<double>(me.step()) / end_time,
                           final_acc,
                           static_cast<double>(groups_joined),
                           sum_controller,
                           synced.wait_s,
                           static_cast<double>(synced.refreshes)};
  std::vector<double> all(mine.size() * static_cast<std::size_t>(n));
  workers->allgather(comm::view(mine), comm::view(all));
  std::vector<float> average = me.params();
  workers->allreduce(comm::view(average), comm::ReduceOp::Avg);
  const double average_acc = task->metric(average);
  std::int64_t created = static_cast<std::int64_t>(workers->subgroups_created());
  workers->allreduce(comm::view(&created, 1), comm::ReduceOp::Max);
  if (id != 0) return std::nullopt;
  write_curve(curve_out, curve);

  RunResult result;
  result.curve = curve;
  result.average_model = std::move(average);
  Json per_worker = Json::array();
  double wall = 0.0, mean_final = 0.0;
  for (int w = 0; w < n; ++w) {
    const double* v = all.data() + static_cast<std::size_t>(w) * mine.size();
    wall = std::max(wall, v[4]);
    mean_final += v[6] / n;
    per_worker.push_back(Json{{"worker", w},
                              {"compute_s", v[0]},
                              {"injected_s", v[1]},
                              {"wait_s", v[2]},
                              {"comm_s", v[3]},
                              {"end_s", v[4]},
                              {"steps_per_s", v[5]},
                              {"idle_fraction", v[2] / v[4]},
                              {"final_accuracy", v[6]}});
    per_worker.back()["syncs"] = v[7];
    if (background) per_worker.back()["sync_wait_s"] = v[9];
    if (overlapped(opt)) per_worker.back()["refreshes"] = v[10];
    // Part of wait_s that is controller and message latency rather than queueing for peers.
    if (controlled) per_worker.back()["controller_s"] = v[8];
  }
  result.summary = run_summary(opt, false, n, wall, task->metric_name(), curve, mean_final, average_acc);
  result.summary["subgroups_created"] = created;
  if (controlled) {
    result.summary["groups_joined_worker0"] = groups_joined;
    result.summary["mean_group_size_worker0"] = groups_joined ? static_cast<double>(members_seen) / groups_joined : 0.0;
  }
  result.summary["per_worker"] = per_worker;
  return result;
}

Json run_summary(const TrainOptions& opt, bool simulated, int workers, double wall_s, const char* metric,
                 const Curve& curve, double final_accuracy_mean, double average_model_accuracy) {
  return Json{{"app", "preduce_train"},
              {"simulate", simulated},
              {"mode", sync_mode_name(opt.mode)},
              {"workers", workers},
              {"steps", opt.steps},
              {"wall_s", wall_s},
              {"metric", metric},
              {"target_accuracy", opt.target_accuracy},
              {"time_to_target_s", curve.time_to(opt.target_accuracy)},
              {"final_accuracy_mean", final_accuracy_mean},
              {"average_model_accuracy", average_model_accuracy}};
}

}  // namespace skew::preduce
