// The MPI driver: one worker per rank. Training runs in segments between checkpoint steps; each
// step is the worker's compute, its injected delay and its sync mode's synchronisation
// (sync/sync_mode.hpp), then its record.
#include "lib/preduce/trainer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "lib/preduce/auto_group.hpp"
#include "lib/preduce/checkpoint.hpp"
#include "lib/preduce/mpi_run.hpp"
#include "mpi/preduce_controller.hpp"

namespace skew::preduce {
namespace {

// Opens the segment's communicators. False on a dedicated controller rank, which serves the
// segment's groups until every worker has finished instead.
bool open_segment(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world) {
  run.pr.reset();  // the previous segment's communicators before the new ones
  run.workers = world;
  if (!run.mode->forms_groups()) return true;
  run.pr = std::make_unique<comm::PartialReduce>(world, run.mode->group_options(run.n), run.dedicated,
                                                 world->rank() == 0 ? run.controller : comm::FormerState{});
  if (!run.pr->is_worker()) {
    run.pr->serve();
    run.controller = run.pr->controller_state();
    return false;
  }
  run.workers = run.pr->workers();
  return true;
}

// One step: the gradient and the mode's local update, the injected delay, the synchronisation.
StepRecord take_step(Worker& me, StepSync& sync, std::int64_t step) {
  StepRecord r;
  const Timer t;
  r.loss = sync.compute(me);
  r.compute = t.seconds();
  r.injected = me.hetero().injected_s(step, r.compute);
  sleep_seconds(r.injected);
  sync.synchronise(me, r);
  me.finish_step();
  return r;
}

// The step's snapshot for the evaluation grid, its totals, metrics line and progress line, and
// whether the worker is out of time (`now`: training time so far).
void record_step(MpiRun& run, StepSync& sync, std::int64_t step, const StepRecord& r, double now) {
  const TrainOptions& opt = run.opt;
  WorkerProgress& p = run.progress;
  std::size_t points = 0;
  for (; p.next_eval <= now; p.next_eval += opt.eval_interval_s) ++points;
  std::int64_t version = 0;
  {
    const auto guard = sync.lock();
    version = run.me->version();
    if (points > 0) run.snapshots.emplace_back(run.me->params(), points);
  }
  p.sum_compute += r.compute;
  p.sum_injected += r.injected;
  p.sum_wait += r.wait;
  p.sum_comm += r.comm;
  p.sum_controller += r.controller;
  if (run.metrics->enabled())
    run.metrics->write(Json{{"step", step},
                            {"time_s", now},
                            {"loss", r.loss},
                            {"version", version},
                            {"members", r.members},
                            {"compute_s", r.compute},
                            {"injected_s", r.injected},
                            {"wait_s", r.wait},
                            {"controller_s", r.controller},
                            {"comm_s", r.comm}});
  if (opt.log_interval > 0 && (step + 1) % opt.log_interval == 0)
    SKEW_INFO("step " << step + 1 << "/" << opt.steps << " loss " << r.loss << " version " << version << " t " << now
                      << "s");
  if (run.mode->time_limited() && now >= opt.max_seconds) p.stopped = true;
}

// Every synchronisation of the segment done: the controller's state kept, the segment's time
// added, and the models snapshotted on the time grid evaluated (after the timed loop, so
// evaluation never stalls a worker or, through the reductions, its peers).
void close_segment(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, StepSync& sync, const Timer& clock) {
  sync.finish(run.progress);
  if (run.pr) {
    run.pr->finish();
    if (world->rank() == 0) run.controller = run.pr->controller_state();
  }
  WorkerProgress& p = run.progress;
  p.elapsed_s += clock.seconds();
  for (const auto& [snapshot, points] : run.snapshots)
    p.series.insert(p.series.end(), points, run.task->metric(snapshot));
  run.snapshots.clear();
}

// Trains up to step `end` (or train.max_seconds); returns with every synchronisation done.
void run_segment(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, std::int64_t end, Progress& progress) {
  if (!open_segment(run, world)) return;
  Worker& me = *run.me;
  const std::unique_ptr<StepSync> sync = run.mode->start_segment({run.workers, run.pr.get(), me, run.progress});
  run.workers->barrier();
  const Timer clock;
  for (std::int64_t step = me.step(); step < end && !run.progress.stopped; ++step) {
    const StepRecord record = take_step(me, *sync, step);
    record_step(run, *sync, step, record, run.progress.elapsed_s + clock.seconds());
    progress.update(step + 1);
  }
  close_segment(run, world, *sync, clock);
}

// Collective over `world` at the end of a segment: the checkpoint of the furthest worker's step
// (with train.max_seconds workers may stop at different steps; each shard records its own).
void save_checkpoint(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, const RunCheckpoints& ckpt) {
  std::int64_t step = run.me ? run.me->step() : 0;
  world->allreduce(comm::view(&step, 1), comm::ReduceOp::Max);
  TensorList tensors;
  if (run.me) append_worker(tensors, *run.me, run.progress);
  if (run.mode->forms_groups() && world->rank() == 0) append_controller(tensors, run.controller);
  ckpt.save(world.get(), step, tensors);
}

// Refuses, before any data is loaded, a run the ranks and the options cannot make.
void check_run(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world) {
  const SyncMode& mode = *run.mode;
  run.dedicated = mode.forms_groups() && run.opt.dedicated_controller;
  run.n = world->size() - (run.dedicated ? 1 : 0);
  check_metrics_path(run.opt, run.n);
  if (mode.forms_groups() && !mode.auto_group_size()) mode.group_options(run.n);  // refuses a bad group size
  mode.check_mpi_run();
  SKEW_CHECK(!run.dedicated || world->size() >= 2,
             "preduce.controller = rank needs at least 2 ranks, got " << world->size());
}

// This rank's worker (none on a dedicated controller rank) and, with an automatic group size,
// the warm-up that measures it.
void start_worker(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world) {
  if (!(run.dedicated && world->rank() == 0)) {
    run.id = world->rank() - (run.dedicated ? 1 : 0);
    run.task = make_task(run.opt, run.n);
    run.me = std::make_unique<Worker>(run.opt, *run.task, run.id, run.n);
  }
  if (!run.mode->auto_group_size()) return;
  run.opt.group_size = measured_group_size(*world, run.me.get(), run.opt, run.warmup_s);
  run.auto_group = true;
  run.mode->group_options(run.n);
  if (world->rank() == 0) SKEW_INFO("preduce.group_size = 0 (auto): P = " << run.opt.group_size);
}

// With output.resume: every rank's state from the newest complete checkpoint that verifies on
// every rank. Returns its step, or -1.
std::int64_t resume(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world, const RunCheckpoints& ckpt) {
  return ckpt.restore([&](bool ok) { return comm::every_rank(*world, ok); },
                      [&](const TensorFile& shard, const std::string& origin) {
                        if (run.me) load_worker(shard, origin, *run.me, run.progress);
                        if (run.mode->forms_groups() && world->rank() == 0) run.controller = load_controller(shard);
                      });
}

// The worker's metrics file, keeping the records of the steps before a resumed one.
void open_metrics(MpiRun& run, const std::shared_ptr<comm::ProcessGroup>& world) {
  const std::string path = metrics_path(run.opt.metrics, world->rank());
  const std::int64_t start = run.me->step();
  if (start > 0) keep_jsonl_records_before(path, "step", start);
  run.metrics = std::make_unique<JsonlWriter>(path, start > 0 ? OutputFile::Mode::Append : OutputFile::Mode::Replace);
}

}  // namespace

std::optional<RunResult> train_mpi(const std::shared_ptr<comm::ProcessGroup>& world, const TrainOptions& options) {
  MpiRun run(options);
  check_run(run, world);
  const RunCheckpoints ckpt(run.opt, world->rank(), world->size(), run.n);
  start_worker(run, world);
  const std::int64_t resumed = resume(run, world, ckpt);
  if (run.me) open_metrics(run, world);
  std::optional<CsvWriter> curve_out = run.id == 0 ? open_curve(run.opt) : std::nullopt;
  std::int64_t first = run.me ? run.me->step() : run.opt.steps;
  world->allreduce(comm::view(&first, 1), comm::ReduceOp::Min);
  {  // the progress line closes before the report
    Progress progress("preduce_train worker 0", first, run.opt.steps, "steps", run.me && run.id == 0);
    for (std::int64_t end : ckpt.segment_ends(first)) {
      run_segment(run, world, end, progress);
      if (ckpt.enabled() && !(end == run.opt.steps && end == resumed)) save_checkpoint(run, world, ckpt);
    }
  }
  if (!run.me) return std::nullopt;
  std::optional<RunResult> result = report(run);
  if (result) write_curve(curve_out, result->curve);
  return result;
}

}  // namespace skew::preduce
