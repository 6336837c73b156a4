#include "lib/preduce/checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

#include "core/checkpoint_resume.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace skew::preduce {
namespace {

// Appended piecewise: GCC 12 reports a false -Wrestrict on "w" + to_string(id) + ...
std::string key(int id, const char* what) {
  std::string name = "w";
  name += std::to_string(id);
  name += '.';
  name += what;
  return name;
}

template <typename T>
void copy_exact(const TensorFile& file, const std::string& origin, const std::string& name, std::vector<T>& dst,
                std::size_t expected) {
  const Tensor& t = file.get(name);
  SKEW_CHECK(t.numel() == expected, origin << ": tensor " << name << " has " << t.numel() << " values, this run needs "
                                           << expected << " (another model or run shape)");
  dst.assign(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace

void append_worker(TensorList& out, Worker& worker, const WorkerProgress& p) {
  const int id = worker.id();
  const auto n = static_cast<std::int64_t>(worker.params().size());
  out.emplace_back(key(id, "params"), Tensor::from_vector(worker.params(), {n}));
  out.emplace_back(key(id, "accum"), Tensor::from_vector(worker.accum(), {n}));
  const std::vector<std::int64_t> counters{worker.step(),     worker.version(), p.groups_joined,    p.members_seen,
                                           p.stopped ? 1 : 0, p.synced.syncs,   p.synced.refreshes, p.synced.members};
  out.emplace_back(key(id, "counters"), Tensor::from_vector(counters, {static_cast<std::int64_t>(counters.size())}));
  const std::vector<double> totals{p.sum_compute,         p.sum_injected, p.sum_wait,  p.sum_comm,
                                   p.sum_controller,      p.elapsed_s,    p.next_eval, p.synced.wait_s,
                                   p.synced.controller_s, p.synced.comm_s};
  out.emplace_back(key(id, "totals"), Tensor::from_vector(totals, {static_cast<std::int64_t>(totals.size())}));
  out.emplace_back(key(id, "series"), Tensor::from_vector(p.series, {static_cast<std::int64_t>(p.series.size())}));
}

void load_worker(const TensorFile& file, const std::string& origin, Worker& worker, WorkerProgress& p) {
  const int id = worker.id();
  const std::size_t n = worker.params().size();
  copy_exact(file, origin, key(id, "params"), worker.params(), n);
  copy_exact(file, origin, key(id, "accum"), worker.accum(), n);
  std::vector<std::int64_t> c;
  copy_exact(file, origin, key(id, "counters"), c, 8);
  std::vector<double> t;
  copy_exact(file, origin, key(id, "totals"), t, 10);
  const Tensor& series = file.get(key(id, "series"));
  p.series.assign(series.data<double>(), series.data<double>() + series.numel());
  worker.set_step(c[0]);
  worker.set_version(c[1]);
  p.groups_joined = c[2];
  p.members_seen = c[3];
  p.stopped = c[4] != 0;
  p.synced.syncs = c[5];
  p.synced.refreshes = c[6];
  p.synced.members = c[7];
  p.sum_compute = t[0];
  p.sum_injected = t[1];
  p.sum_wait = t[2];
  p.sum_comm = t[3];
  p.sum_controller = t[4];
  p.elapsed_s = t[5];
  p.next_eval = t[6];
  p.synced.wait_s = t[7];
  p.synced.controller_s = t[8];
  p.synced.comm_s = t[9];
}

void append_controller(TensorList& out, const comm::FormerState& s) {
  const std::vector<std::int64_t> counters{s.groups_formed, s.groups_since_reset, s.connecting_groups};
  out.emplace_back("controller.counters", Tensor::from_vector(counters, {3}));
  const std::vector<std::int32_t> parent(s.parent.begin(), s.parent.end());
  out.emplace_back("controller.parent", Tensor::from_vector(parent, {static_cast<std::int64_t>(parent.size())}));
}

comm::FormerState load_controller(const TensorFile& file) {
  const Tensor& c = file.get("controller.counters");
  SKEW_CHECK(c.numel() == 3, "checkpoint tensor controller.counters has " << c.numel() << " values, not 3");
  const Tensor& parent = file.get("controller.parent");
  comm::FormerState s{c.data<std::int64_t>()[0], c.data<std::int64_t>()[1], c.data<std::int64_t>()[2], {}};
  s.parent.assign(parent.data<std::int32_t>(), parent.data<std::int32_t>() + parent.numel());
  return s;
}

Json run_identity(const TrainOptions& opt, int workers) {
  std::string hidden;
  for (int w : opt.hidden) {
    if (!hidden.empty()) hidden += ',';
    hidden += std::to_string(w);
  }
  return Json{{"simulate", opt.simulate},
              {"sync.mode", opt.mode},
              {"preduce.reduce", opt.reduce_gradient ? "gradient" : "model"},
              {"preduce.controller", opt.dedicated_controller ? "rank" : "thread"},
              {"workers", workers},
              {"model.kind", opt.model_kind},
              {"model.hidden", hidden},
              {"model.k", opt.fm_k},
              {"data.source", opt.source}};
}

RunCheckpoints::RunCheckpoints(const TrainOptions& opt, int world_rank, int world_size, int workers)
    : opt_(&opt), identity_(run_identity(opt, workers)) {
  if (!opt.checkpoint_dir.empty())
    dir_ = std::make_unique<CheckpointDir>(opt.checkpoint_dir, world_rank, world_size, opt.keep);
}

std::vector<std::int64_t> RunCheckpoints::segment_ends(std::int64_t first) const {
  std::vector<std::int64_t> ends;
  const std::int64_t every = opt_->checkpoint_interval;
  if (enabled() && every > 0)
    for (std::int64_t b = (first / every + 1) * every; b < opt_->steps; b += every) ends.push_back(b);
  ends.push_back(opt_->steps);
  return ends;
}

void RunCheckpoints::save(comm::ProcessGroup* world, std::int64_t step, const TensorList& tensors) const {
  dir_->write_shard(step, tensors, {{"step", std::to_string(step)}});
  if (world) world->barrier();  // every shard is on disk: the index, then the marker
  if (!world || world->rank() == 0) {
    Json index = identity_;
    dir_->write_index(step, {{"run", index}});
    dir_->commit(step);
  }
  // No rank goes on (to a run that resumes from this directory, say) before the step is marked
  // complete, so every rank sees the same newest checkpoint.
  if (world) world->barrier();
}

void RunCheckpoints::check_identity(std::int64_t step, const Json& index) const {
  const std::string file = dir_->index_file(step);
  SKEW_CHECK(index.contains("run") && index["run"].is_object(),
             file << ": no \"run\" record; not a preduce_train checkpoint");
  for (const auto& [name, value] : identity_.items())
    SKEW_CHECK(index["run"].contains(name) && index["run"][name] == value,
               file << ": the checkpoint was written with " << name << " = "
                    << (index["run"].contains(name) ? index["run"][name].dump() : std::string("(none)"))
                    << ", this run has " << value.dump() << "; refusing to resume");
}

std::int64_t RunCheckpoints::restore(const std::function<bool(bool)>& agree, const ShardLoader& load) const {
  if (!enabled() || !opt_->resume) return -1;
  Json index;
  std::optional<TensorFile> shard;  // the candidate step's, verified
  ResumeSteps how;
  how.read = [&](std::int64_t step) {
    shard.reset();
    // Another world size's step is refused below, not skipped: its shard is not this rank's.
    if (dir_->written_world_size(step) != dir_->world_size()) return;
    index = dir_->read_index(step);
    shard = dir_->read_shard(step);
  };
  how.agree = agree;
  how.load = [&](std::int64_t step) {
    dir_->require_this_world_size(step);
    check_identity(step, index);
    load(*shard, dir_->rank_file(step));
    if (dir_->rank() == 0) SKEW_INFO("resumed from " << dir_->rank_file(step) << " at step " << step);
  };
  return resume_newest_intact(*dir_, how);
}

}  // namespace skew::preduce
