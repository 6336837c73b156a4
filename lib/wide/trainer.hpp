// WideTrainer: one synchronous data-parallel training step on a mini-batch with either schema,
// and evaluation (logloss, AUC) over a dataset, both across the ranks of a process group.
//
// It is also the small API other trainers use (preduce_train):
//   WideTrainer t(WideModel::create({WideKind::FM, features, fields, k}, seed), options);
//   t.step(data, begin, end);              // local step when constructed without a group
//   std::vector<float>& p = t.parameters(); // the flat parameter vector (get or overwrite)
//   Evaluation e = t.evaluate(valid);       // logloss, AUC
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/timer.hpp"
#include "core/zero_pages.hpp"
#include "kernels/wide_flow.hpp"
#include "kernels/wide_pool.hpp"
#include "lib/wide/dataset.hpp"
#include "lib/wide/model.hpp"
#include "lib/wide/optimizer.hpp"
#include "mpi/process_group.hpp"

namespace skew::wide {

class CudaStep;  // the step on a CUDA device (lib/wide/gpu_trainer.hpp), internal to WideTrainer

enum class TrainSchema { Classical, Flow };
TrainSchema schema_from_name(const std::string& name);  // classical | flow
const char* schema_name(TrainSchema schema);
enum class TrainDevice { Cpu, Cuda };
TrainDevice device_from_name(const std::string& name);  // cpu | cuda
// Throws, naming train.device, unless `device` can run here (a CUDA build and a visible GPU for
// Cuda): fit() asks before it loads any data.
void require_device(TrainDevice device);
const char* device_name(TrainDevice device);

// How the classical schema's CPU threads share the model on one rank: hogwild (per-sample
// updates in place, no locks) or atomic (a mini-batch gradient with atomic adds, one update
// per batch). Several ranks and the CUDA path always synchronise a batch gradient (atomic).
enum class ClassicalSync { Hogwild, Atomic };
ClassicalSync classical_sync_from_name(const std::string& name);  // hogwild | atomic

struct TrainOptions {
  TrainSchema schema = TrainSchema::Flow;
  ClassicalSync classical_sync = ClassicalSync::Hogwild;
  TrainDevice device = TrainDevice::Cpu;
  bool overlap = true;  // cuda: copy the next batch while this one computes (second stream)
  int threads = 1;
  bool profile = false;  // train.profile: the CPU steps' pool passes timed (WideTrainer::profile)
  OptimizerOptions optimizer;
  kernels::WideFlowOptions flow;
};

// train.profile's timings of the CPU steps (step_rows): their count and wall seconds in all, and
// per pass of the pool within a step (kernels::WidePool's passes), its wall and threads' CPU seconds.
struct StepProfile {
  std::int64_t steps = 0;
  double step_seconds = 0;
  std::vector<kernels::WidePoolPass> passes;
};
// train.profile's summary (wide_train's step_profile): microseconds per step, the pool's passes
// (each one's wall time and its threads' CPU times) and the rest of the step outside them.
Json step_profile_json(const StepProfile& profile);

struct StepResult {
  double loss = 0;            // mean logloss of the global batch (before the update)
  std::int64_t samples = 0;   // global batch size
  std::int64_t nonzeros = 0;  // global nonzeros
  double kernel_seconds = 0;  // time in the schema's gradient kernel on this rank
};

struct Evaluation {
  double logloss = 0, auc = 0.5;
  std::int64_t samples = 0;
};

// The sorted union over `group` of every rank's sorted, distinct model rows (each < num_rows,
// which may reach 2^32): the rows whose gradients a multi-rank step all-reduces. Collective.
std::vector<std::uint32_t> union_of_rows(comm::ProcessGroup& group, const std::vector<std::uint32_t>& rows,
                                         std::int64_t num_rows);

// Whether classical Hogwild runs (per-sample updates, no batch gradient): the classical schema
// with hogwild sync on the CPU of a single rank.
bool runs_hogwild(const TrainOptions& o, int ranks);
// Model-shaped arrays a step reads and writes per touched row (kernels::wide_row_traffic):
// the parameters, the optimiser's state, and a batch gradient unless the step is Hogwild's (the
// classical CPU schema on one rank).
int model_shaped_arrays(const TrainOptions& o, int ranks);

// One trainer for every device: options.device chooses the step's kernels (the CPU's on a
// WidePool, or CUDA's), the rest (synchronisation over the group, evaluation, parameters) is
// shared.
class WideTrainer {
 public:
  // `group` may be null (single process); with allreduce sync every rank applies the same
  // update from the gradient summed over the group, so models stay identical.
  WideTrainer(WideModel model, const TrainOptions& options, std::shared_ptr<comm::ProcessGroup> group = nullptr);
  ~WideTrainer();
  WideTrainer(WideTrainer&&) noexcept;
  WideTrainer& operator=(WideTrainer&&) noexcept;

  // Rows [begin, end) of `data` are this rank's share of the global mini-batch; rows
  // [next_begin, next_end), when given, are the next step's (the CUDA path copies them ahead).
  StepResult step(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::int64_t next_begin = 0,
                  std::int64_t next_end = 0);
  // The same for rows given by pointers (the CPU trainer: rows still being loaded, OverlappedLoad).
  StepResult step_rows(const kernels::WideBatch& b);
  // The batch gradient only (sum over samples, not applied): for tests and for callers that
  // synchronise gradients themselves. `grad` is resized to the number of parameters.
  void gradient(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::vector<float>& grad,
                std::vector<float>& logits);
  Evaluation evaluate(const SparseDataset& data);
  std::vector<float> predict(const SparseDataset& data);  // probabilities

  // The whole model, every deferred row written (WideModel::materialise). On the CUDA path these
  // bring the parameters back from the GPU first, and the next step sends the (possibly
  // overwritten) host copy up again.
  WideModel& model();
  WideParams& parameters() { return model().params; }
  std::size_t parameter_count() const { return model_.params.size(); }
  // Replaces every parameter (a checkpoint's): deferred rows are dropped, not written first.
  void set_parameters(std::span<const float> values);
  const TrainOptions& options() const { return options_; }
  // The optimizer and its state (CPU path: on the CUDA path the GPU holds the live state).
  Optimizer& optimizer() { return *optimizer_; }
  const kernels::WideFlow* flow() const { return flow_.get(); }
  // With options().profile, the CPU steps' timings so far (else empty).
  StepProfile profile() const;

 private:
  StepResult cpu_step(const kernels::WideBatch& b);  // step_rows, untimed
  // More than one rank trains: gradients are summed over the group.
  bool distributed() const { return group_ && group_->size() > 1; }
  bool hogwild() const;  // runs_hogwild for this trainer
  // The host copy is current (CUDA path: brought back) and the deferred rows `data` reads are written.
  void ready_to_read(const SparseDataset& data);
  StepResult hogwild_step(const kernels::WideBatch& batch);
  // The CUDA device's step: the GPU computes and updates, the group's sum is taken on the host.
  StepResult cuda_step(const SparseDataset& data, std::int64_t begin, std::int64_t end, std::int64_t next_begin,
                       std::int64_t next_end);
  void compute(const kernels::WideBatch& batch, float* grad, float* logits);
  void touched_features(const kernels::WideBatch& batch);
  void densify_sparse_gradient();
  void synchronise(float* grad, double& loss_sum, std::int64_t& samples, std::int64_t& nonzeros);

  WideModel model_;
  TrainOptions options_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::unique_ptr<kernels::WidePool> pool_;
  std::unique_ptr<kernels::WideFlow> flow_;
  std::unique_ptr<CudaStep> cuda_;  // train.device = cuda
  bool host_params_newer_ = false;  // CUDA path: the host copy was handed out (or overwritten)
  void download_if_stale();
  void upload_if_newer();  // CUDA path: the host copy goes up before the GPU reads the parameters
  std::unique_ptr<Optimizer> optimizer_;
  // The dense batch gradient: the optimizer zeroes each row it applies, so only rows some batch
  // touched are ever written, and the rest stay untouched zero pages (a Criteo-sized FFM's
  // gradient is gigabytes, most of it never used).
  ZeroPageVector<float> grad_;
  std::vector<float> logits_;
  kernels::WideSparseGradient sparse_grad_;  // the flow schema: the gradient in feature-row form
  ZeroPageVector<std::uint32_t> stamp_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t stamp_value_ = 0;
  std::int64_t profiled_steps_ = 0;  // train.profile
  double profiled_seconds_ = 0;
};

}  // namespace skew::wide
