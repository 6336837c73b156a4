// preduce_train's typed options, which the trainer, the simulator and the sync modes read; this
// library never sees the configuration. The app's options file (apps/preduce_train_options.hpp)
// declares their keys and fills this struct: a field is its key's name (train.steps -> steps,
// sync.mode -> mode, hetero.* -> hetero.*), prefixed by the section where the name alone is
// ambiguous (sim.workers -> sim_workers, eager.deadline_ms -> eager_deadline_ms); a choice of two
// is a bool named by its second value (preduce.reduce -> reduce_gradient, preduce.controller ->
// dedicated_controller, eager.quorum -> eager_majority); model.k is fm_k, data.source is source.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lib/preduce/hetero.hpp"
#include "mpi/preduce_groups.hpp"

namespace skew::preduce {

struct TrainOptions {
  // data
  std::string source = "clusters", mnist_dir = "data/mnist";
  int rows = 4000, test_rows = 1000, dim = 32, classes = 4;
  int eval_rows = 0;  // mlp: the test accuracy over the first eval_rows test rows; 0 = all
  double separation = 4.0;
  std::int64_t ctr_features = 1 << 14;
  // model: mlp (hidden widths; empty = multinomial logistic regression) or a wide model
  std::string model_kind = "mlp";
  std::vector<int> hidden;
  int fm_k = 4;
  // train
  std::int64_t steps = 200;
  double max_seconds = 0.0;  // 0 = none; honoured by all modes but allreduce (SyncMode::time_limited)
  int batch = 32;
  double lr = 0.1;
  std::uint64_t seed = 1;
  double eval_interval_s = 0.25, target_accuracy = 0.9;
  std::int64_t log_interval = 50;
  // sync
  std::string mode = "preduce";  // allreduce, preduce, adpsgd, eager, local: sync/sync_mode.hpp
  bool reduce_gradient = false;  // preduce.reduce = gradient
  bool dedicated_controller = false;
  bool overlap = false;                      // preduce.overlap: group averaging on a communication thread
  int refresh_staleness = 0;                 // preduce.refresh_staleness (overlap): 0 = off
  int group_size = 2, isolation_bound = 10;  // group_size 0 = auto (auto_group.hpp)
  int auto_warmup_steps = 20, auto_max_group = 8;
  double auto_slow_ratio = 1.5;
  double alpha = 0.9, preduce_deadline_ms = 0.0;
  comm::MemberRule member_rule = comm::MemberRule::KeepOwn;  // preduce.member_rule
  comm::IsolationRule isolation_rule = comm::IsolationRule::FreshMember;
  double eager_deadline_ms = 5.0;
  bool eager_majority = false;
  int eager_sync_every = 10;
  HeteroOptions hetero;
  // simulator
  bool simulate = false;
  int sim_workers = 4, sim_eval_workers = 8;
  // sim_controller_ms: 0.54 ms a group, as the real 4-rank runs measured for overlapped partial
  // reduce (results/preduce/mnist_4rank/runs/calibration.txt: 0.537 at P = 2, 0.547 at P = 3;
  // blocking P-Reduce and eager measured 0.29-0.31 ms): the most a group was measured to cost.
  double sim_compute_ms = 1.0, sim_latency_ms = 0.05, sim_bandwidth_gbs = 10.0, sim_controller_ms = 0.54,
         sim_overhead_ms = 0.0;
  bool sim_latency_linear = false;  // sim.latency_growth = linear (else log2)
  // output
  std::string metrics, curve;
  std::string checkpoint_dir;            // empty = no checkpoints
  std::int64_t checkpoint_interval = 0;  // steps; 0 = only at the end
  int keep = 2;
  bool resume = false;
};

}  // namespace skew::preduce
