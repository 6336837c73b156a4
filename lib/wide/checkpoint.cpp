#include "lib/wide/checkpoint.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/checkpoint_resume.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace skew::wide {

namespace {

// The run state's fields by tensor name: one table serves save and restore, so neither can
// forget a field the other has. Integers and doubles travel as I64 / F64 scalars, bit-exact.
std::vector<std::pair<const char*, std::int64_t*>> int_fields(WideRunState& s) {
  return {{"run.epoch", &s.epoch},
          {"run.step_in_epoch", &s.step_in_epoch},
          {"run.global_step", &s.global_step},
          {"run.epoch_samples", &s.epoch_samples},
          {"run.window_steps", &s.window_steps},
          {"run.best_epoch", &s.best_epoch},
          {"run.since_best", &s.since_best},
          {"run.epochs_run", &s.epochs_run},
          {"run.total_samples", &s.total_samples},
          {"run.total_nonzeros", &s.total_nonzeros}};
}

std::vector<std::pair<const char*, double*>> float_fields(WideRunState& s) {
  return {{"run.epoch_loss_sum", &s.epoch_loss_sum},
          {"run.window_loss", &s.window_loss},
          {"run.epoch_seconds", &s.epoch_seconds},
          {"run.best_loss", &s.best_loss},
          {"run.best_auc", &s.best_auc},
          {"run.train_seconds", &s.train_seconds}};
}

constexpr const char* kParams = "model.params";
constexpr const char* kOptimizerN = "optimizer.n";  // AdaGrad's and FTRL's sum of squared gradients
constexpr const char* kOptimizerZ = "optimizer.z";  // FTRL's z

std::vector<float> floats_of(const TensorFile& file, const std::string& name, std::size_t want,
                             const std::string& where) {
  const Tensor& t = file.get(name);
  SKEW_CHECK(t.dtype() == DType::F32 && t.numel() == want, where << ": " << name << " holds " << t.numel() << " "
                                                                 << dtype_name(t.dtype()) << " values, this run needs "
                                                                 << want << " F32");
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

void check_checkpoint_options(const OutputOptions& output, TrainDevice device) {
  SKEW_CHECK(!output.resume || !output.checkpoint_dir.empty(), "output.resume = true needs output.checkpoint_dir");
  // The CUDA trainer's parameters and optimizer state live on the GPU, which has no path to
  // bring the optimizer state back: refuse rather than save a state that would not resume.
  SKEW_CHECK(output.checkpoint_dir.empty() || device == TrainDevice::Cpu,
             "output.checkpoint_dir is set but train.device = "
                 << device_name(device)
                 << ": wide_train checkpoints and resumes the CPU trainer only; leave output.checkpoint_dir empty");
}

WideCheckpoint::WideCheckpoint(const OutputOptions& output, TrainDevice device, comm::ProcessGroup& world,
                               RunIdentity identity)
    : world_(world), identity_(std::move(identity)) {
  check_checkpoint_options(output, device);
  const std::string& dir = output.checkpoint_dir;
  resume_ = output.resume;
  if (dir.empty()) return;
  interval_ = output.checkpoint_interval;
  dir_ = std::make_unique<CheckpointDir>(dir, world.rank(), world.size(), output.keep);
}

bool WideCheckpoint::restore(WideTrainer& trainer, WideRunState& state) {
  if (!dir_ || !resume_) return false;
  std::optional<TensorFile> file;  // the candidate step's shard, verified
  ResumeSteps how;
  how.read = [&](std::int64_t step) {
    file.reset();
    // Another world size's step is refused by load, not skipped: its shard is not this rank's.
    if (dir_->written_world_size(step) == world_.size()) file = dir_->read_shard(step);
  };
  how.agree = [&](bool ok) { return comm::every_rank(world_, ok); };
  how.load = [&](std::int64_t step) {
    dir_->require_this_world_size(step);
    load(*file, dir_->rank_file(step), step, trainer, state);
  };
  if (resume_newest_intact(*dir_, how) >= 0) return true;
  SKEW_INFO("output.resume: no complete checkpoint in " << dir_->dir() << ", starting afresh");
  return false;
}

void WideCheckpoint::load(const TensorFile& file, const std::string& where, std::int64_t step, WideTrainer& trainer,
                          WideRunState& state) const {
  for (const auto& [key, value] : identity_) {
    const auto it = file.metadata.find(key);
    SKEW_CHECK(it != file.metadata.end(), where << ": not a wide_train checkpoint (metadata '" << key << "' missing)");
    SKEW_CHECK(it->second == value, where << " was written by a run with " << key << " = " << it->second
                                          << "; this run has " << key << " = " << value
                                          << ": resume with the same setting or start a new output.checkpoint_dir");
  }
  trainer.set_parameters(floats_of(file, kParams, trainer.parameter_count(), where));
  Optimizer& optimizer = trainer.optimizer();
  optimizer.set_state(optimizer.n_state().empty() ? std::vector<float>{}
                                                  : floats_of(file, kOptimizerN, optimizer.n_state().size(), where),
                      optimizer.z_state().empty() ? std::vector<float>{}
                                                  : floats_of(file, kOptimizerZ, optimizer.z_state().size(), where));
  for (auto [name, field] : int_fields(state)) {
    const Tensor& t = file.get(name);
    SKEW_CHECK(t.dtype() == DType::I64 && t.numel() == 1, where << ": " << name << " is not one I64");
    *field = *t.data<std::int64_t>();
  }
  for (auto [name, field] : float_fields(state)) {
    const Tensor& t = file.get(name);
    SKEW_CHECK(t.dtype() == DType::F64 && t.numel() == 1, where << ": " << name << " is not one F64");
    *field = *t.data<double>();
  }
  SKEW_CHECK(state.global_step == step,
             where << ": run.global_step " << state.global_step << " is not the step " << step << " it is filed under");
  SKEW_INFO("resumed from " << where << ": epoch " << state.epoch << ", " << state.step_in_epoch << " steps into it");
}

void WideCheckpoint::save(WideTrainer& trainer, const WideRunState& state) {
  if (!dir_) return;
  WideRunState copy = state;  // the field tables take pointers
  std::vector<std::pair<std::string, Tensor>> tensors;
  const WideParams& params = trainer.parameters();
  tensors.emplace_back(kParams, Tensor::from_vector(params, {std::int64_t(params.size())}));
  const Optimizer& optimizer = trainer.optimizer();
  // AdaGrad's n is written with eps where no step has touched it yet (it holds 0 for that).
  const std::vector<float> n = optimizer.saved_n_state();
  for (const auto& [name, values] :
       {std::pair{kOptimizerN, std::span<const float>(n)}, std::pair{kOptimizerZ, optimizer.z_state()}}) {
    if (values.empty()) continue;
    Tensor t = Tensor::empty({std::int64_t(values.size())}, DType::F32);
    std::copy(values.begin(), values.end(), t.data<float>());
    tensors.emplace_back(name, std::move(t));
  }
  for (auto [name, field] : int_fields(copy))
    tensors.emplace_back(name, Tensor::from_vector(std::vector<std::int64_t>{*field}, {1}));
  for (auto [name, field] : float_fields(copy))
    tensors.emplace_back(name, Tensor::from_vector(std::vector<double>{*field}, {1}));
  dir_->write_shard(state.global_step, tensors, identity_);
  world_.barrier();  // every shard is on disk before the step is marked complete
  if (world_.rank() == 0) dir_->commit(state.global_step);
}

}  // namespace skew::wide
