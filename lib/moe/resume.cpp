#include "lib/moe/resume.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/checkpoint_resume.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/log.hpp"

namespace skew::moe {

namespace {

// What one rank reads of a candidate step, verified: the index and the shards it needs, by the
// rank that wrote them.
struct StepFiles {
  Json index;
  std::map<int, TensorFile> shards;
};

// The writing rank of the first shard the index lists for `tensor` ("rank_00003.safetensors").
int holder_of(const Json& index, const std::string& tensor, const std::string& index_path) {
  const Json* files = nullptr;
  if (index.contains("tensors") && index["tensors"].contains(tensor)) files = &index["tensors"][tensor]["files"];
  SKEW_CHECK(files && files->is_array() && !files->empty() && (*files)[0].is_string(),
             "checkpoint index " << index_path << " names no shard holding tensor " << tensor);
  const std::string name = (*files)[0].get<std::string>();
  for (int r = 0; r < index.value("world_size", 0); ++r)
    if (CheckpointDir::shard_name(r) == name) return r;
  SKEW_THROW("checkpoint index " << index_path << " places tensor " << tensor << " in " << name
                                 << ", not a shard of its " << index.value("world_size", 0) << " ranks");
}

// At another world size: rank 0's shard (dense state, policy state) and the holders of the
// experts this rank's placement gives it.
std::set<int> shards_for_resharding(const Json& index, const std::string& index_path, MoeNetwork<float>& model,
                                    int rank) {
  std::set<int> ranks = {0};
  for (std::size_t l = 0; l < model.moe().size(); ++l)
    for (int e : model.moe()[l]->placement().experts_on(rank))
      for (const char* what : {"w", "m", "v"})
        ranks.insert(holder_of(index, expert_tensor_name(l, e, what), index_path));
  return ranks;
}

StepFiles read_step(const Session& s, std::int64_t step, int written) {
  StepFiles f;
  const int rank = s.world.rank();
  f.index = s.ckpt->read_index(step);
  // Another model's checkpoint: restore() refuses it by name before any shard is looked up.
  if (!model_mismatch(f.index, s.ckpt->index_file(step), s.model_keys).empty()) return f;
  if (written == s.world.size()) {
    f.shards.emplace(rank, s.ckpt->read_shard(step));
    return f;
  }
  for (int r : shards_for_resharding(f.index, s.ckpt->index_file(step), s.model->network(), rank))
    f.shards.emplace(r, s.ckpt->read_shard(step, r));
  return f;
}

void load_step(Session& s, std::int64_t step, int written, const StepFiles& f) {
  const int rank = s.world.rank();
  const std::string index_path = s.ckpt->index_file(step);
  MoeNetwork<float>& net = s.model->network();
  for (const auto& [r, shard] : f.shards)
    check_index_before_load(f.index, index_path, shard, CheckpointDir::shard_name(r), s.policy_name);
  if (written == s.world.size()) {
    const TensorFile& shard = f.shards.at(rank);
    load_state(shard, net, *s.adam, rank);
    s.policy->load_state(shard);
    check_index_after_load(f.index, index_path, net);
    return;
  }
  load_state_resharded(
      [&](const std::string& name) -> const Tensor& {
        const TensorFile& dense_source = f.shards.at(0);
        if (dense_source.has(name)) return dense_source.get(name);
        return f.shards.at(holder_of(f.index, name, index_path)).get(name);
      },
      net, *s.adam, rank);
  s.policy->load_state(f.shards.at(0));
  if (rank == 0)
    SKEW_INFO("re-sharded checkpoint step " << step << " from " << written << " ranks to " << s.world.size()
                                            << ": experts in block placement, dense state from rank 0's shard");
}

// The refusals of a verified step whose files do not fit this run: every rank's alike (the
// index and marker are files all ranks read alike).
void check_step_fits(const Session& s, std::int64_t step, int written, const StepFiles& files) {
  const std::string other_model = model_mismatch(files.index, s.ckpt->index_file(step), s.model_keys);
  SKEW_CHECK(other_model.empty(), other_model);
  SKEW_CHECK(written == s.world.size() || s.policy_name != "flexmoe",
             "checkpoint step " << step << " in " << s.ckpt->dir() << " was written by " << written
                                << " ranks under moe.policy=flexmoe, whose expert replicas, placements and load "
                                   "history are planned for that many ranks; resume it with "
                                << written << " ranks, or start a new checkpoint directory");
  // Routing traces are one file per rank of the run that wrote them.
  for (const auto& [key, file] : {std::pair{"moe.save_trace", &s.options.moe.save_trace},
                                  std::pair{"moe.replay_trace", &s.options.moe.replay_trace}})
    SKEW_CHECK(written == s.world.size() || file->empty(),
               key << " is one file per rank, but checkpoint step " << step << " was written by " << written
                   << " ranks and this run has " << s.world.size() << ": resume without it, or with " << written
                   << " ranks");
}

}  // namespace

std::int64_t restore(Session& s) {
  const bool resume = s.options.output.resume;
  SKEW_CHECK(s.ckpt || !resume, "output.resume = true needs output.checkpoint_dir, the directory to resume from");
  if (!s.ckpt || !resume) return 0;
  int written = 0;  // the world size in the candidate step's marker
  StepFiles files;
  ResumeSteps how;
  how.read = [&](std::int64_t step) {
    files = {};
    written = s.ckpt->written_world_size(step);
    files = read_step(s, step, written);
  };
  how.agree = [&](bool ok) { return comm::every_rank(s.world, ok); };
  how.load = [&](std::int64_t step) {
    check_step_fits(s, step, written, files);
    try {
      load_step(s, step, written, files);
    } catch (const Error& e) {  // the files verified: the config no longer matches them
      throw Error("resuming from " + s.ckpt->rank_file(step) + ": " + e.what());
    }
    SKEW_INFO("resumed from " << s.ckpt->rank_file(step) << " at iteration " << step);
  };
  return std::max<std::int64_t>(resume_newest_intact(*s.ckpt, how), 0);
}

}  // namespace skew::moe
