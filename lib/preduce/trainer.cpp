// The MPI driver: one worker per rank, sync modes over skew::comm.
#include "lib/preduce/trainer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "lib/preduce/auto_group.hpp"
#include "lib/preduce/background.hpp"
#include "lib/preduce/checkpoint.hpp"
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

namespace {

// One process's part of an MPI run: its worker (none on a dedicated controller rank) and what
// it carries from one segment to the next. A segment ends at a checkpoint step, where every
// worker stops, the controller and the communication threads drain, and the state is saved,
// so a checkpoint is never taken while a group or an averaging is in flight.
struct MpiRun {
  explicit MpiRun(const TrainOptions& options) : opt(options) {}
  TrainOptions opt;       // a copy: preduce.group_size = 0 (auto) is resolved into it
  double warmup_s = 0.0;  // auto group size: the warm-up window's time (its slowest worker's)
  bool controlled = false, dedicated = false;
  int n = 0, id = -1;
  std::unique_ptr<Task> task;
  std::unique_ptr<Worker> me;
  WorkerProgress progress;
  comm::FormerState controller;             // world rank 0
  std::unique_ptr<comm::PartialReduce> pr;  // the last segment's (its worker group ends the run)
  std::shared_ptr<comm::ProcessGroup> workers;
  std::unique_ptr<JsonlWriter> metrics;
  std::vector<float> scratch;
};

// Trains up to step `end` (or train.max_seconds); returns with every synchronisation done.
void run_segment(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, std::int64_t end) {
  const TrainOptions& opt = run.opt;
  run.pr.reset();  // the previous segment's communicators before the new ones
  run.workers = world;
  if (run.controlled) {
    run.pr = std::make_unique<comm::PartialReduce>(world, group_options(opt, run.n), run.dedicated,
                                                   world->rank() == 0 ? run.controller : comm::FormerState{});
    if (!run.pr->is_worker()) {
      run.pr->serve();
      run.controller = run.pr->controller_state();
      return;
    }
    run.workers = run.pr->workers();
  }
  Worker& me = *run.me;
  WorkerProgress& p = run.progress;
  comm::PartialReduce* pr = run.pr.get();
  std::unique_ptr<BackgroundSync> background;
  if (opt.mode == SyncMode::Adpsgd) background = make_gossip(run.workers, me, opt.seed);
  if (overlapped(opt)) background = make_overlapped_reduce(*pr, me, opt);
  // Models are snapshotted on the time grid and evaluated after the segment, so evaluation
  // never stalls a worker (or, through the reductions, its peers) inside the timed loop.
  std::vector<std::pair<std::vector<float>, std::size_t>> snapshots;  // model, grid points it covers
  run.workers->barrier();
  const Timer clock;
  for (std::int64_t step = me.step(); step < end && !p.stopped; ++step) {
    Timer t;
    double wait = 0.0, comm_time = 0.0, controller = 0.0;
    std::vector<int> members;
    double loss = 0.0;
    if (background) {
      // The gradient at a snapshot; the communication thread may change the model meanwhile,
      // and the gradient is applied to whatever the model is then.
      {
        auto guard = background->lock();
        run.scratch = me.params();
      }
      loss = me.gradient_at(run.scratch);
    } else {
      loss = me.local_step();
    }
    const double compute = t.seconds();
    const double injected = me.hetero().injected_s(step, compute);
    sleep_seconds(injected);
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
          sleep_seconds(me.hetero().link_s());  // a slow link holds back the whole all-reduce
          run.workers->allreduce(comm::view(me.grad()), comm::ReduceOp::Avg);
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
          sleep_seconds(me.hetero().link_s());  // a slow link holds back its group
          if (opt.mode == SyncMode::Eager) {
            pr->average_gradient(me.accum(), g);
            me.apply_reduced(true);
            if (g.full_sync) pr->average_model(me.params(), g, run.scratch);
            me.set_version(g.max_version + 1);
          } else if (opt.reduce_gradient) {
            pr->average_gradient(me.grad(), g);
            me.apply_reduced(false);
            me.set_version(g.max_version + 1);
          } else {
            pr->average_model(me.params(), g, run.scratch);
            me.set_version(g.max_version);
          }
          comm_time = t.seconds();
          members = g.members;
          ++p.groups_joined;
          p.members_seen += static_cast<std::int64_t>(g.members.size());
          break;
        }
      }
    }
    me.finish_step();
    std::int64_t version = 0;
    const double now = p.elapsed_s + clock.seconds();
    std::size_t points = 0;
    for (; p.next_eval <= now; p.next_eval += opt.eval_interval_s) ++points;
    {
      std::unique_lock<std::mutex> guard;
      if (background) guard = background->lock();
      version = me.version();
      if (points > 0) snapshots.emplace_back(me.params(), points);
    }
    p.sum_compute += compute;
    p.sum_injected += injected;
    p.sum_wait += wait;
    p.sum_comm += comm_time;
    p.sum_controller += controller;
    if (run.metrics->enabled())
      run.metrics->write(Json{{"step", step},
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
    if (time_limited(opt) && now >= opt.max_seconds) p.stopped = true;
  }
  if (background) {
    // Its time is off the computing thread's path: comm, controller and the wait for a group are
    // the communication thread's.
    background->stop();
    const BackgroundSync::Stats s = background->stats();
    p.synced.syncs += s.syncs;
    p.synced.refreshes += s.refreshes;
    p.synced.members += s.members;
    p.synced.wait_s += s.wait_s;
    p.synced.controller_s += s.controller_s;
    p.synced.comm_s += s.comm_s;
  }
  if (pr) {
    pr->finish();
    if (world->rank() == 0) run.controller = pr->controller_state();
  }
  p.elapsed_s += clock.seconds();
  for (const auto& [snapshot, points] : snapshots) p.series.insert(p.series.end(), points, run.task->metric(snapshot));
}

// Collective over `world` at the end of a segment: the checkpoint of the furthest worker's step
// (with train.max_seconds workers may stop at different steps; each shard records its own).
void save_checkpoint(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, const RunCheckpoints& ckpt) {
  std::int64_t step = run.me ? run.me->step() : 0;
  world->allreduce(comm::view(&step, 1), comm::ReduceOp::Max);
  TensorList tensors;
  if (run.me) append_worker(tensors, *run.me, run.progress);
  if (run.controlled && world->rank() == 0) append_controller(tensors, run.controller);
  ckpt.save(world.get(), step, tensors);
}

}  // namespace

std::optional<RunResult> train_mpi(const std::shared_ptr<comm::ProcessGroup>& world, const TrainOptions& options) {
  MpiRun run(options);
  const TrainOptions& opt = run.opt;
  run.controlled = opt.mode == SyncMode::Preduce || opt.mode == SyncMode::Eager;
  run.dedicated = run.controlled && opt.dedicated_controller;
  run.n = world->size() - (run.dedicated ? 1 : 0);
  check_metrics_path(opt, run.n);
  const bool auto_group = opt.mode == SyncMode::Preduce && opt.group_size == 0;
  if (run.controlled && !auto_group) group_options(opt, run.n);  // refuses a bad group size before loading data
  bool slow_link = false;
  for (double ms : opt.hetero.link_ms) slow_link = slow_link || ms > 0.0;
  SKEW_CHECK(!(slow_link && opt.mode == SyncMode::Adpsgd),
             "hetero.link_ms: not injected into MPI runs of sync.mode = adpsgd (its gossip thread is in mpi/); "
             "use --simulate for slow links with AD-PSGD");
  SKEW_CHECK(!run.dedicated || world->size() >= 2,
             "preduce.controller = rank needs at least 2 ranks, got " << world->size());
  const bool is_worker = !(run.dedicated && world->rank() == 0);
  const RunCheckpoints ckpt(opt, world->rank(), world->size(), run.n);
  if (is_worker) {
    run.id = world->rank() - (run.dedicated ? 1 : 0);
    run.task = make_task(opt, run.n);
    run.me = std::make_unique<Worker>(opt, *run.task, run.id, run.n);
  }
  if (auto_group) {
    run.opt.group_size = measured_group_size(*world, run.me.get(), opt, run.warmup_s);
    group_options(opt, run.n);
    if (world->rank() == 0) SKEW_INFO("preduce.group_size = 0 (auto): P = " << opt.group_size);
  }
  const std::int64_t resumed = ckpt.latest_to_resume();
  std::int64_t lowest = resumed, highest = resumed;
  world->allreduce(comm::view(&lowest, 1), comm::ReduceOp::Min);
  world->allreduce(comm::view(&highest, 1), comm::ReduceOp::Max);
  SKEW_CHECK(lowest == highest, opt.checkpoint_dir << ": the ranks see different newest complete checkpoints (steps "
                                                   << lowest << " and " << highest << "; -1 = none)");
  if (resumed >= 0) {
    std::string origin;
    const TensorFile shard = ckpt.read(resumed, origin);
    if (run.me) load_worker(shard, origin, *run.me, run.progress);
    if (run.controlled && world->rank() == 0) run.controller = load_controller(shard);
    if (world->rank() == 0) SKEW_INFO("resumed from " << origin << " at step " << resumed);
  }
  if (is_worker) {
    const std::string path = metrics_path(opt.metrics, world->rank());
    const std::int64_t start = run.me->step();
    if (start > 0) keep_jsonl_records_before(path, "step", start);
    run.metrics = std::make_unique<JsonlWriter>(path, start > 0 ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
  }
  std::optional<CsvWriter> curve_out = run.id == 0 ? open_curve(opt) : std::nullopt;
  std::int64_t first = run.me ? run.me->step() : opt.steps;
  world->allreduce(comm::view(&first, 1), comm::ReduceOp::Min);
  for (std::int64_t end : ckpt.segment_ends(first)) {
    run_segment(run, world, end);
    if (ckpt.enabled() && !(end == opt.steps && end == resumed)) save_checkpoint(run, world, ckpt);
  }
  if (!is_worker) return std::nullopt;
  Worker& me = *run.me;
  const WorkerProgress& p = run.progress;
  const std::shared_ptr<comm::ProcessGroup>& workers = run.workers;
  const int n = run.n, id = run.id;
  std::int64_t groups_joined = p.groups_joined, members_seen = p.members_seen;
  double sum_comm = p.sum_comm, sum_controller = p.sum_controller;
  const bool background = opt.mode == SyncMode::Adpsgd || overlapped(opt);
  if (background) {
    groups_joined = p.synced.syncs;
    members_seen = p.synced.members;
    sum_comm = p.synced.comm_s;
    sum_controller = p.synced.controller_s;
  }
  const double end_time = p.elapsed_s;
  const double final_acc = run.task->metric(me.params());
  std::vector<double> series = p.series;

  // Mean accuracy curve: pad every worker's series to the longest with its final accuracy.
  std::int64_t length = static_cast<std::int64_t>(series.size());
  workers->allreduce(comm::view(&length, 1), comm::ReduceOp::Max);
  series.resize(static_cast<std::size_t>(length), final_acc);
  workers->allreduce(comm::view(series), comm::ReduceOp::Avg);
  Curve curve{opt.eval_interval_s, series};
  // Per-worker totals, gathered: compute, injected, wait, comm, end time, steps/s, final accuracy.
  // Then synchronisations joined, controller latency, the communication thread's wait, refreshes.
  std::vector<double> mine{p.sum_compute,
                           p.sum_injected,
                           p.sum_wait,
                           sum_comm,
                           end_time,
                           static_cast<double>(me.step()) / end_time,
                           final_acc,
                           static_cast<double>(groups_joined),
                           sum_controller,
                           p.synced.wait_s,
                           static_cast<double>(p.synced.refreshes)};
  std::vector<double> all(mine.size() * static_cast<std::size_t>(n));
  workers->allgather(comm::view(mine), comm::view(all));
  std::vector<float> average = me.params();
  workers->allreduce(comm::view(average), comm::ReduceOp::Avg);
  const double average_acc = run.task->metric(average);
  std::int64_t created = static_cast<std::int64_t>(workers->subgroups_created());
  workers->allreduce(comm::view(&created, 1), comm::ReduceOp::Max);
  const bool controlled = run.controlled;
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
  result.summary = run_summary(opt, false, n, wall, run.task->metric_name(), curve, mean_final, average_acc);
  result.summary["subgroups_created"] = created;
  if (controlled) {
    result.summary["groups_joined_worker0"] = groups_joined;
    result.summary["mean_group_size_worker0"] = groups_joined ? static_cast<double>(members_seen) / groups_joined : 0.0;
  }
  if (auto_group) {
    result.summary["group_size"] = opt.group_size;
    result.summary["auto_warmup_s"] = run.warmup_s;  // not in the curve's clock: add it to time_to_target_s
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
